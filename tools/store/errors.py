"""The errors the ``store`` tool raises beyond the port's own.

The port promises two typed errors from ``core.contracts.errors``: ``StoreValueError`` (an
``increment`` on a non-counter, an ``append`` to a non-list; built with the same messages on every
backend) and ``StoreUnavailable`` (the backing store cannot be reached). The tool raises the
latter as :class:`StoreBackendUnavailable`, which is *also* a ``core.errors.ToolUnavailableError``:
a caller catching ``StoreUnavailable`` (as ``memoize()`` does) sees what the port promised, and the
ToolProxy, which marks a tool DEAD only on ``ToolUnavailableError``, marks ``store`` DEAD at once
and OK again on the next call that succeeds.

:class:`StoreEncodeError` refuses a value that is not a JSON document, on every backend (the
in-process one included, so a value that works on one machine still works after scaling out).
"""

from __future__ import annotations

from core.contracts.errors import ErrorClass, StoreUnavailable, StoreValueError
from core.errors import KeelError, ToolUnavailableError


class StoreBackendUnavailable(StoreUnavailable, ToolUnavailableError):
    """The backing store (SQLite file, PostgreSQL, Redis) could not be reached or used."""

    error_class = ErrorClass.TRANSIENT


class StoreEncodeError(KeelError, TypeError):
    """A value given to the store is not a JSON document (a set, bytes, NaN, an arbitrary object)."""

    caller_error = True
    error_class = ErrorClass.PERMANENT


def not_a_list(verb: str, key: str) -> StoreValueError:
    """``append`` / ``list`` on a key that holds something other than a list (the reference wording)."""
    return StoreValueError(f"cannot {verb} {key!r}: it holds a value that is not a list", key=key)
