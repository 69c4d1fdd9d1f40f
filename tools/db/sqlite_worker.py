"""One SQLite connection, owned by one thread, fed jobs from the event loop.

``sqlite3`` blocks, so every statement runs off the loop. Each connection lives in its own thread
for its whole life (SQLite connections must not hop between threads mid-statement), and a job is a
plain function ``fn(connection, *args)`` that does *all* the work of one call — execute, fetch,
count — so a call costs exactly one hand-off to the thread and one back to the loop.

Jobs run strictly in the order they were submitted. The engine relies on that: a clean-up job
queued before the write lock is released always runs before the next holder's first statement,
even if the task that queued it was cancelled while waiting.

This is ``sqlite3`` in a dedicated thread rather than ``aiosqlite`` (which does the same thing per
connection) because the engine needs several connections (a writer and readers) with the same
lean path, jobs that run a whole call in one hop, and ordered fire-and-forget clean-up jobs.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from core.sqlite_thread import rollback_if_open

log = logging.getLogger("keel.db")

Job = Callable[..., Any]


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _report(future: asyncio.Future[Any]) -> None:
    """Done-callback of fire-and-forget jobs: a failure there is logged, never lost."""
    if not future.cancelled() and future.exception() is not None:
        log.error("sqlite clean-up job failed", exc_info=future.exception())


class SqliteWorker:
    """A thread that owns one ``sqlite3.Connection`` and runs submitted jobs against it in order."""

    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection]) -> None:
        self.name = name
        self._connect = connect
        self._queue: SimpleQueue[tuple[Job, tuple[Any, ...], asyncio.Future[Any]] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        """Open the connection in the worker's thread; raise what opening raised."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=self.name, daemon=True)
        self._thread.start()
        await ready

    def submit(self, job: Job, *args: Any) -> asyncio.Future[Any]:
        """Queue ``job(connection, *args)``; the future settles with its result or exception."""
        future = asyncio.get_running_loop().create_future()
        self._queue.put((job, args, future))
        return future

    def post(self, job: Job, *args: Any) -> None:
        """Queue a job nobody waits for (a clean-up); its failure is logged."""
        self.submit(job, *args).add_done_callback(_report)

    async def stop(self) -> None:
        """Close the connection after every job already queued, then end the thread."""
        if self._thread is None:
            return
        closed = self.submit(_close)
        self._queue.put(None)
        self._thread = None
        await closed

    def _serve(self, ready: asyncio.Future[None]) -> None:
        loop = ready.get_loop()
        try:
            connection = self._connect()
        except BaseException as exc:
            _call_soon(loop, _fail, ready, exc)
            return
        _call_soon(loop, _succeed, ready, None)
        get = self._queue.get
        try:
            while (item := get()) is not None:
                job, args, future = item
                try:
                    result = job(connection, *args)
                except BaseException as exc:  # delivered to the awaiting task, never lost in the thread
                    _call_soon(future.get_loop(), _fail, future, exc)
                else:
                    _call_soon(future.get_loop(), _succeed, future, result)
        finally:
            connection.close()


def _close(connection: sqlite3.Connection) -> None:
    rollback_if_open(connection)
    connection.close()


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass  # the loop has closed: nobody is waiting any more
