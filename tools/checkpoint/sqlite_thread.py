"""One SQLite connection owned by one thread, running whole operations handed over from the loop.

``sqlite3`` blocks, so each checkpoint operation is a plain function ``job(connection, *args)`` that does
all of its work (a read, or ``BEGIN IMMEDIATE`` ... ``COMMIT``) in the connection's own thread, for
one hand-off there and one back. Jobs run in the order they were submitted. A job that raises
rolls back whatever it left open, so the connection is clean for the next one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

Job = Callable[..., Any]


class SqliteThread:
    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection]) -> None:
        self._name = name
        self._connect = connect
        self._queue: SimpleQueue[tuple[Job, tuple[Any, ...], asyncio.Future[Any]] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        """Open the connection in its thread; raise what opening raised."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=self._name, daemon=True)
        self._thread.start()
        await ready

    async def run(self, job: Job, *args: Any) -> Any:
        if self._thread is None:
            raise sqlite3.OperationalError("the connection is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put((job, args, future))
        return await future

    async def stop(self) -> None:
        if self._thread is None:
            return
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put((_close, (), future))
        self._queue.put(None)
        self._thread = None
        await future

    def _serve(self, ready: asyncio.Future[None]) -> None:
        loop = ready.get_loop()
        try:
            connection = self._connect()
        except BaseException as exc:
            _settle(loop, ready, None, exc)
            return
        _settle(loop, ready, None, None)
        try:
            while (item := self._queue.get()) is not None:
                job, args, future = item
                try:
                    result = job(connection, *args)
                except BaseException as exc:
                    if connection.in_transaction:
                        connection.rollback()
                    _settle(loop, future, None, exc)
                else:
                    _settle(loop, future, result, None)
        finally:
            connection.close()


def _close(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        connection.rollback()


def _settle(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    def settle() -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:
        pass  # the loop has closed: nobody is waiting any more
