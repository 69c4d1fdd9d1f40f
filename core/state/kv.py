"""``InMemoryStore``: the in-process ``StorePort``, and the reference the other backends are held to.

Production code, not a test double: it is the single-machine store and the behaviour every other
backend of the port must match.

* Tenancy: every method takes ``scope`` (``None`` is the zero tenant ``Scope()``); the same key in
  two scopes names two values.
* Values are snapshots. ``set`` keeps a deeply frozen copy and ``get`` / ``list`` hand back a fresh
  editable copy, so neither the writer nor a reader can change what is stored, just as with a store
  that serialises.
* Expiry: ``ttl`` is in seconds, read from the injected ``ClockPort`` (the system clock by default),
  and must be positive. An expired key reads as missing and is dropped when next touched.
* ``get_or_set`` is single-flight per key: concurrent callers for a missing key wait for the first
  producer instead of each running their own. A producer that raises stores nothing, and the next
  waiter runs its own producer.
* ``append`` / ``list`` keep an append-only list under a key; ``list`` of a missing key is ``[]``.
  Either one on a key that holds something other than a list raises ``StoreValueError``.
* ``increment`` counts in integers only. ``by`` must be an ``int`` (not a ``bool``, not ``2.0``) and
  the key must be missing or hold an integer; otherwise ``StoreValueError``. A missing key counts from
  zero, and ``ttl`` applies when the increment creates the counter: later increments keep the first
  expiry, which is what a fixed-window rate limit needs.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from typing import Any

from core.contracts.errors import StoreValueError, require_integer_amount
from core.contracts.ports import ClockPort
from core.contracts.types import Scope
from core.execution.keyed_lock import KeyedLock
from core.runtime.null import SystemClock
from core.serialization import FrozenList, deep_freeze, thaw

__all__ = ["InMemoryStore"]

_ZERO = Scope()
_Key = tuple[str, str]


class _Entry:
    __slots__ = ("expires_at", "value")

    def __init__(self, value: Any, expires_at: float | None) -> None:
        self.value = value
        self.expires_at = expires_at


def _check_ttl(ttl: float | None) -> None:
    if ttl is not None and (isinstance(ttl, bool) or not ttl > 0):
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")


class InMemoryStore:
    """A ``StorePort`` held in this process's memory."""

    def __init__(self, *, clock: ClockPort | None = None) -> None:
        self._clock: ClockPort = clock if clock is not None else SystemClock()
        self._entries: dict[_Key, _Entry] = {}
        # Per-key single-flight locks, with how many callers hold or await each (dropped at zero).
        self._locks = KeyedLock()

    # ---- plain values --------------------------------------------------------------------------

    async def get(self, key: str, *, scope: Scope | None = None) -> Any | None:
        entry = self._live(self._key(key, scope))
        return None if entry is None else thaw(entry.value)

    async def set(
        self, key: str, value: Any, *, ttl: float | None = None, scope: Scope | None = None
    ) -> None:
        _check_ttl(ttl)
        self._entries[self._key(key, scope)] = _Entry(deep_freeze(value), self._expiry(ttl))

    async def delete(self, key: str, *, scope: Scope | None = None) -> None:
        self._entries.pop(self._key(key, scope), None)

    async def get_or_set(
        self,
        key: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        ttl: float | None = None,
        scope: Scope | None = None,
    ) -> Any:
        _check_ttl(ttl)
        full = self._key(key, scope)
        entry = self._live(full)
        if entry is not None:
            return thaw(entry.value)
        async with self._locks.hold(full):
            entry = self._live(full)
            if entry is not None:
                return thaw(entry.value)
            value = await fn()
            self._entries[full] = _Entry(deep_freeze(value), self._expiry(ttl))
            return value

    # ---- append-only lists ---------------------------------------------------------------------

    async def append(self, key: str, value: Any, *, scope: Scope | None = None) -> None:
        full = self._key(key, scope)
        entry = self._live(full)
        if entry is None:
            self._entries[full] = _Entry(FrozenList([value]), None)
            return
        if not isinstance(entry.value, list):
            raise StoreValueError(f"cannot append to {key!r}: it holds a value that is not a list", key=key)
        entry.value = FrozenList([*entry.value, value])

    async def list(self, key: str, *, scope: Scope | None = None) -> builtins.list[Any]:
        entry = self._live(self._key(key, scope))
        if entry is None:
            return []
        if not isinstance(entry.value, list):
            raise StoreValueError(f"cannot list {key!r}: it holds a value that is not a list", key=key)
        items: builtins.list[Any] = thaw(entry.value)
        return items

    # ---- counters ------------------------------------------------------------------------------

    async def increment(
        self, key: str, by: int = 1, *, ttl: float | None = None, scope: Scope | None = None
    ) -> int:
        amount = require_integer_amount(key, by)
        _check_ttl(ttl)
        full = self._key(key, scope)
        entry = self._live(full)
        if entry is None:
            self._entries[full] = _Entry(amount, self._expiry(ttl))
            return amount
        current = entry.value
        if isinstance(current, bool) or not isinstance(current, int):
            raise StoreValueError.not_a_counter(key)
        total: int = current + amount
        entry.value = total
        return total

    # ---- internals -----------------------------------------------------------------------------

    @staticmethod
    def _key(key: str, scope: Scope | None) -> _Key:
        return ((scope if scope is not None else _ZERO).key(), key)

    def _expiry(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock.now() + ttl

    def _live(self, full: _Key) -> _Entry | None:
        entry = self._entries.get(full)
        if entry is None:
            return None
        if entry.expires_at is not None and self._clock.now() >= entry.expires_at:
            del self._entries[full]
            return None
        return entry
