"""``memory://``: the store held in this process, with the reference store's behaviour.

It keeps the same JSON text the networked backends keep, so values round-trip exactly as they
would through SQLite or Redis, and expiry follows ``core.state.stores.InMemoryStore``: an entry is
gone once the clock reaches ``written + ttl``. Expired entries are dropped when touched, and swept
whenever a write finds the last sweep more than ``SWEEP_SECONDS`` old, so keys written once and
never read again do not accumulate. Nothing survives the process.
"""

from __future__ import annotations

from collections.abc import Callable
from time import time

from .backend import append_to_list_text, counter_value, expiry

SWEEP_SECONDS = 60.0

_Entry = tuple[str, float | None]


class MemoryBackend:
    def __init__(self, *, clock: Callable[[], float] = time) -> None:
        self._clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._last_sweep = clock()

    def describe(self) -> str:
        return "in-process memory (nothing survives a restart)"

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        self._entries.clear()

    async def ping(self) -> bool:
        return True

    def _live(self, full: tuple[str, str]) -> _Entry | None:
        entry = self._entries.get(full)
        if entry is not None and entry[1] is not None and self._clock() >= entry[1]:
            del self._entries[full]
            return None
        return entry

    def _written(self) -> None:
        now = self._clock()
        if now - self._last_sweep >= SWEEP_SECONDS:
            self._last_sweep = now
            expired = [k for k, (_, at) in self._entries.items() if at is not None and now >= at]
            for full in expired:
                del self._entries[full]

    async def lookup(self, scope: str, key: str) -> str | None:
        entry = self._live((scope, key))
        return None if entry is None else entry[0]

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None:
        self._entries[scope, key] = (text, expiry(self._clock(), ttl))
        self._written()

    async def delete(self, scope: str, key: str) -> None:
        self._entries.pop((scope, key), None)

    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        entry = self._live((scope, key))
        if entry is not None:
            return entry[0]
        await self.put(scope, key, text, ttl)
        return None

    async def append(self, scope: str, key: str, item: str) -> None:
        entry = self._live((scope, key))
        if entry is None:
            self._entries[scope, key] = (f"[{item}]", None)
            self._written()
            return
        self._entries[scope, key] = (append_to_list_text(entry[0], item), entry[1])

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        entry = self._live((scope, key))
        if entry is None:
            await self.put(scope, key, str(by), ttl)
            return by
        total = counter_value(entry[0]) + by
        self._entries[scope, key] = (str(total), entry[1])
        return total
