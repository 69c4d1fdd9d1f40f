"""One SQLite connection owned by one thread, running whole operations handed over from the loop.

``sqlite3`` blocks, so each operation of a tool backed by SQLite is a plain function
``job(connection, *args)`` that does all of its work (a read, or ``BEGIN IMMEDIATE`` ... ``COMMIT``)
in the connection's own thread, for one hand-off there and one back. Jobs run in the order they
were submitted. A job that raises rolls back whatever it left open, so the connection is clean for
the next one. The thread carries the name its owner gives it (``keel-store-sqlite``, say), which is
what tells one tool's connection from another's in a thread dump.

:func:`connect_file` is the connection those tools hand it: a file in WAL mode with a busy timeout,
so several connections (other processes, the ``db`` tool's) share it, and its tables created.

It lives in ``core`` because it is a standard-library primitive that several tools share (the
``store`` and ``checkpoint`` tools each keep a SQLite file), and tools may import ``core`` but not
each other.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from core.threads import settle_from_thread

Job = Callable[..., Any]


class SqliteThread:
    """A connection opened by ``connect`` in a daemon thread named ``name``, serving jobs one at a time."""

    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection]) -> None:
        self._name = name
        self._connect = connect
        self._queue: SimpleQueue[tuple[Job, tuple[Any, ...], asyncio.Future[Any]] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        """Open the connection in its thread; raise what opening raised (and stay closed)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=self._name, daemon=True)
        self._thread.start()
        try:
            await ready
        except Exception:  # connecting failed, the thread has ended (a cancelled start leaves it to stop())
            self._thread = None
            raise

    async def run(self, job: Job, *args: Any) -> Any:
        """``job(connection, *args)`` in the connection's thread, after the jobs submitted before it;
        what it returns or raises. ``sqlite3.OperationalError`` when the connection is not open."""
        if self._thread is None:
            raise sqlite3.OperationalError("the connection is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put((job, args, future))
        return await future

    async def stop(self) -> None:
        """Let the jobs already submitted finish, roll back what they left open, close the connection."""
        if self._thread is None:
            return
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put((rollback_if_open, (), future))
        self._queue.put(None)
        self._thread = None
        await future

    def _serve(self, ready: asyncio.Future[None]) -> None:
        loop = ready.get_loop()
        try:
            connection = self._connect()
        except BaseException as exc:
            settle_from_thread(loop, ready, None, exc)
            return
        settle_from_thread(loop, ready, None, None)
        try:
            while (item := self._queue.get()) is not None:
                job, args, future = item
                try:
                    result = job(connection, *args)
                except BaseException as exc:
                    rollback_if_open(connection)
                    settle_from_thread(loop, future, None, exc)
                else:
                    settle_from_thread(loop, future, result, None)
        finally:
            connection.close()


def rollback_if_open(connection: sqlite3.Connection) -> None:
    """Roll back what a job left open (a job of its own: one queued behind a ``BEGIN`` whose caller
    stopped waiting keeps the connection clean for the next transaction)."""
    if connection.in_transaction:
        connection.rollback()


def connect_file(path: str, *, schema: str, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """A connection to the SQLite file ``path`` (``:memory:`` too), its folder created if missing, in WAL
    mode with ``synchronous=NORMAL`` and a busy timeout, usable from any thread; ``schema`` (one
    statement, ``CREATE TABLE IF NOT EXISTS ...``) is run before it is returned."""
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        _while_busy(connection, "PRAGMA journal_mode = WAL", busy_timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
        _while_busy(connection, schema, busy_timeout)
    except BaseException:
        connection.close()
        raise
    return connection


def _while_busy(connection: sqlite3.Connection, sql: str, limit: float) -> None:
    """Run ``sql``, retrying while another connection holds the lock (switching the journal mode
    does not wait on SQLite's busy handler, so a concurrent writer, such as the ``db`` tool
    migrating at boot, makes it fail at once)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            connection.execute(sql)
            return
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


class SqliteFile:
    """One SQLite file behind one :class:`SqliteThread`, opened on first use.

    Concurrent first calls open one connection, not one each; ``close()`` waits for an open in
    progress, so its thread is stopped too. Every SQLite failure reaches the caller as the tool's own
    ``unavailable(message)`` error, so a backend built on this never lets ``sqlite3`` errors through.
    """

    def __init__(
        self,
        path: str,
        *,
        schema: str,
        busy_timeout: float,
        thread_name: str,
        label: str,
        unavailable: Callable[[str], Exception],
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._schema = schema
        self._thread_name = thread_name
        self._label = label
        self._unavailable = unavailable
        self._thread: SqliteThread | None = None
        self._opening = asyncio.Lock()

    def describe(self) -> str:
        return f"sqlite {self.path}"

    async def open(self) -> None:
        async with self._opening:
            if self._thread is not None:
                return
            thread = SqliteThread(self._thread_name, self._connect)
            try:
                await thread.start()
            except (OSError, sqlite3.Error) as exc:
                raise self._unavailable(f"cannot open {self._label} at {self.path}: {exc}") from exc
            self._thread = thread

    def _connect(self) -> sqlite3.Connection:
        return connect_file(self.path, schema=self._schema, busy_timeout=self.busy_timeout)

    async def close(self) -> None:
        async with self._opening:  # an open in progress finishes first, so its thread is stopped too
            thread, self._thread = self._thread, None
        if thread is not None:
            await thread.stop()

    async def run(self, job: Job, *args: Any) -> Any:
        """``job(connection, *args)`` on the connection thread, opening the file first if needed."""
        if self._thread is None:
            await self.open()
        thread = self._thread
        if thread is None:
            raise self._unavailable(f"{self._label} at {self.path} was closed while being opened")
        try:
            return await thread.run(job, *args)
        except sqlite3.OperationalError as exc:
            raise self._unavailable(f"{self._label} at {self.path} cannot be used: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(f"{self._label} at {self.path} failed: {exc}") from exc

    async def ping(self) -> bool:
        return bool(await self.run(lambda c: c.execute("SELECT 1").fetchone()[0] == 1))
