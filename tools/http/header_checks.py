"""uvicorn's check of every response header, answered from memory for the headers that repeat.

uvicorn's httptools protocol runs two regular expressions over every header it writes, one over
the name and one over the value, byte by byte: about 2,300 instructions a header, a twelfth of
what serving a small JSON answer costs here, and most headers it checks are the same bytes on
every response (``server``, the date for a whole second, ``content-type: application/json``, the
``content-length`` values Keel keeps made). ``install()`` puts a :class:`MemoPattern` in front of
each expression, in the module globals uvicorn's ``send`` reads them from:

- it gives the answer the expression gives (the match object, or ``None``), so uvicorn refuses
  exactly the headers it refused before;
- bytes that are all letters and digits (a request id, a length) have no byte either expression
  looks for: they are answered by ``bytes.isalnum`` and not remembered, so a value that never
  repeats does not push out the ones that do;
- anything else is remembered, up to ``MEMO_SIZE`` values; when full the memory starts again.

h11 (``HTTP_PROTOCOL`` without httptools) validates in the h11 package and is left alone. Should
uvicorn stop reading these two globals, ``install()`` changes nothing and says so with ``False``.
"""

from __future__ import annotations

import re
from typing import Any

MEMO_SIZE = 1024


class _Memo(dict[bytes, Any]):
    __slots__ = ("pattern",)

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        super().__init__()
        self.pattern = pattern

    def __missing__(self, value: bytes) -> Any:
        if value.isalnum():
            return None
        found = self.pattern.search(value)
        if len(self) >= MEMO_SIZE:
            self.clear()
        self[value] = found
        return found


class MemoPattern:
    """Stands in for a compiled byte pattern whose only use is ``search``."""

    __slots__ = ("pattern", "search")
    keel_header_memo = True  # how ``is_memo`` knows one made by another copy of this module

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.search = _Memo(pattern).__getitem__  # a dict lookup when the bytes were seen before


def is_memo(value: object) -> bool:
    """Whether ``value`` is a :class:`MemoPattern`, of this module or of the same file imported
    again from another project root (the kernel imports a root's tools under their own names)."""
    return getattr(type(value), "keel_header_memo", False) is True


def install() -> bool:
    """Put a :class:`MemoPattern` in front of uvicorn's two header patterns (once per process)."""
    from uvicorn.protocols.http import httptools_impl

    installed = False
    for name in ("HEADER_RE", "HEADER_VALUE_RE"):
        current = getattr(httptools_impl, name, None)
        if is_memo(current):
            installed = True
        elif isinstance(current, re.Pattern):
            setattr(httptools_impl, name, MemoPattern(current))
            installed = True
    return installed
