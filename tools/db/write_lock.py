"""The in-process write lock of the SQLite engine: FIFO, handed over directly, bounded wait.

SQLite allows one writer at a time. Inside one process, tasks queue here instead of hammering the
file lock; across processes SQLite's own ``busy_timeout`` applies. Waiting is bounded by the same
timeout, so a task that can never get the lock (a task spawned inside a transaction whose owner
waits for it) fails with ``kind="busy"`` naming the holder, instead of hanging forever.

The lock is handed straight to the next waiter on release (no barging), and the uncontended path
neither yields to the loop nor arms a timer.
"""

from __future__ import annotations

import asyncio
from collections import deque

from .errors import DatabaseError, DbErrorKind


class WriteLock:
    """A FIFO lock whose ``acquire`` gives up after a bounded wait."""

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.holder: asyncio.Task[object] | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it or waits for it (the common case, with no coroutine)."""
        if self._held or self._waiters:
            return False
        self._held = True
        self.holder = asyncio.current_task()
        return True

    async def acquire(self, patience: float) -> None:
        """Take the lock, waiting at most ``patience`` seconds behind earlier callers."""
        if self.try_acquire():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        holder = self.holder
        try:
            async with asyncio.timeout(patience):
                await future
        except BaseException as exc:
            if future.done() and not future.cancelled():
                self.release()  # handed over just as we gave up: pass it on
            else:
                future.cancel()
            if isinstance(exc, TimeoutError):
                raise DatabaseError(
                    DbErrorKind.BUSY,
                    f"waited {patience:g}s (DB_BUSY_TIMEOUT) for the SQLite write lock held by "
                    f"{_describe(holder)}; note that a task started inside a transaction does not "
                    "join it, so it cannot write until that transaction ends",
                ) from None
            raise
        self.holder = asyncio.current_task()

    def release(self) -> None:
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)  # ownership passes to that waiter; _held stays True
                return
        self._held = False
        self.holder = None


def _describe(task: asyncio.Task[object] | None) -> str:
    return f"task {task.get_name()!r}" if task is not None else "another task"
