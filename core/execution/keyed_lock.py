"""One ``asyncio.Lock`` per key, kept only while someone holds or waits for it.

Single-flight loads (``get_or_set``) need a lock per key without the table of locks growing with
every key ever seen: each entry counts its users and goes away when the last one leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class KeyedLock:
    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold the lock of ``key`` for the block; tasks holding other keys are not delayed."""
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """How many keys have a holder or a waiter now."""
        return len(self._locks)
