"""What every ``store`` backend implements: JSON text in and out, addressed by (scope, key).

The tool does everything that must read the same on every backend (validating ``ttl`` and amounts,
encoding values as JSON, single-flight ``get_or_set``, building the errors) and hands a backend
only text. A backend keeps each (scope, key) apart, expires entries ``ttl`` seconds after they were
written (an expired entry reads as missing), and raises :class:`NotAList` / :class:`NotACounter`
for the tool to turn into the port's ``StoreValueError``. Every value a backend holds is the
compact JSON text :func:`encode` produced, so a stored list is exactly the text that starts with
``[`` and appending is text surgery, with no parse.
"""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

from .errors import StoreEncodeError

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


class NotAList(Exception):
    """The key holds a value that is not a list."""


class NotACounter(Exception):
    """The key holds a value that is not an integer."""


class Backend(Protocol):
    def describe(self) -> str: ...
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> bool: ...
    async def lookup(self, scope: str, key: str) -> str | None:
        """The stored text, or ``None`` when the key is missing or expired."""
        ...

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None: ...
    async def delete(self, scope: str, key: str) -> None: ...
    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        """Store ``text`` only if the key is missing (or expired): ``None``, else the text already there."""
        ...

    async def append(self, scope: str, key: str, item: str) -> None:
        """Add ``item`` (JSON text) to the list under the key, creating it; keeps the key's expiry."""
        ...

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        """Add ``by`` to the integer under the key (from 0 when missing, then with ``ttl``)."""
        ...


def encode(value: Any, key: str) -> str:
    """The compact JSON text of ``value``; :class:`StoreEncodeError` when it is not a JSON document."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreEncodeError(f"the value for {key!r} is not a JSON document: {exc}") from None


def decode(text: str) -> Any:
    return json.loads(text)


def append_to_list_text(current: str, item: str) -> str:
    """``current`` (a JSON array's text) with ``item`` appended; :class:`NotAList` for other text."""
    if not current.startswith("["):
        raise NotAList
    return f"[{item}]" if current == "[]" else f"{current[:-1]},{item}]"


def counter_value(current: str) -> int:
    """The integer ``current`` holds; :class:`NotACounter` for any other JSON value."""
    if not current or current[0] not in "-0123456789":
        raise NotACounter
    value = json.loads(current)
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotACounter
    return value


def expiry(now: float, ttl: float | None) -> float | None:
    return None if ttl is None else now + ttl


def ttl_milliseconds(ttl: float) -> int:
    return max(1, math.ceil(ttl * 1000))
