"""``sqlite:///path``: the store in a SQLite file, shared by every process on the machine.

One table, ``keel_store (scope, k, value, expires_at)``, created on first use; ``value`` is the JSON
text and ``expires_at`` a unix time (``NULL``: never). One connection in its own thread runs each
operation whole: reads are single statements, and every read-modify-write (``add``, ``append``,
``increment``) is one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock first, so
two processes incrementing one counter never lose an update. The file is opened in WAL mode with
``synchronous=NORMAL`` and a busy timeout, like the ``db`` tool's. Expired rows are deleted when a
write finds the last sweep more than a minute old.

A file that cannot be opened, or a lock held past the busy timeout, is ``StoreBackendUnavailable``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from core.sqlite_thread import SqliteThread, connect_file

from .backend import NotAList, append_to_list_text, counter_value, expiry
from .errors import StoreBackendUnavailable

SWEEP_SECONDS = 60.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS keel_store (
    scope TEXT NOT NULL,
    k TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at REAL,
    PRIMARY KEY (scope, k)
) WITHOUT ROWID
"""
SELECT = "SELECT value, expires_at FROM keel_store WHERE scope = ? AND k = ?"
UPSERT = (
    "INSERT INTO keel_store (scope, k, value, expires_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (scope, k) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
)


class SqliteBackend:
    def __init__(
        self, path: str, *, busy_timeout: float = 5.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._clock = clock
        self._thread: SqliteThread | None = None
        self._opening = asyncio.Lock()
        self._last_sweep = 0.0

    def describe(self) -> str:
        return f"sqlite {self.path}"

    async def open(self) -> None:
        async with self._opening:
            if self._thread is not None:
                return
            thread = SqliteThread("keel-store-sqlite", self._connect)
            try:
                await thread.start()
            except (OSError, sqlite3.Error) as exc:
                raise StoreBackendUnavailable(f"cannot open the store at {self.path}: {exc}") from exc
            self._thread = thread

    def _connect(self) -> sqlite3.Connection:
        return connect_file(self.path, schema=SCHEMA, busy_timeout=self.busy_timeout)

    async def close(self) -> None:
        async with self._opening:  # an open in progress finishes first, so its thread is stopped too
            thread, self._thread = self._thread, None
        if thread is not None:
            await thread.stop()

    async def _run(self, job: Callable[..., Any], *args: Any) -> Any:
        if self._thread is None:
            await self.open()
        thread = self._thread
        if thread is None:
            raise StoreBackendUnavailable(f"the store at {self.path} was closed while being opened")
        try:
            return await thread.run(job, *args)
        except sqlite3.OperationalError as exc:
            raise StoreBackendUnavailable(f"the store at {self.path} cannot be used: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreBackendUnavailable(f"the store at {self.path} failed: {exc}") from exc

    async def ping(self) -> bool:
        return bool(await self._run(lambda c: c.execute("SELECT 1").fetchone()[0] == 1))

    async def lookup(self, scope: str, key: str) -> str | None:
        return await self._run(_lookup, scope, key, self._clock())  # type: ignore[no-any-return]

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None:
        await self._run(_put, scope, key, text, expiry(self._clock(), ttl), self._sweep_due())

    async def delete(self, scope: str, key: str) -> None:
        await self._run(lambda c: c.execute("DELETE FROM keel_store WHERE scope = ? AND k = ?", (scope, key)))

    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        return await self._run(_add, scope, key, text, self._clock(), ttl)  # type: ignore[no-any-return]

    async def append(self, scope: str, key: str, item: str) -> None:
        await self._run(_append, scope, key, item, self._clock())

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        return await self._run(_increment, scope, key, by, self._clock(), ttl)  # type: ignore[no-any-return]

    def _sweep_due(self) -> float | None:
        now = self._clock()
        if now - self._last_sweep < SWEEP_SECONDS:
            return None
        self._last_sweep = now
        return now


def _live(
    connection: sqlite3.Connection, scope: str, key: str, now: float
) -> tuple[str, float | None] | None:
    row = connection.execute(SELECT, (scope, key)).fetchone()
    if row is None or (row[1] is not None and now >= row[1]):
        return None
    return row[0], row[1]


def _lookup(connection: sqlite3.Connection, scope: str, key: str, now: float) -> str | None:
    entry = _live(connection, scope, key, now)
    return None if entry is None else entry[0]


def _put(
    connection: sqlite3.Connection,
    scope: str,
    key: str,
    text: str,
    expires_at: float | None,
    sweep: float | None,
) -> None:
    connection.execute(UPSERT, (scope, key, text, expires_at))
    if sweep is not None:
        connection.execute(
            "DELETE FROM keel_store WHERE expires_at IS NOT NULL AND expires_at <= ?", (sweep,)
        )


def _add(
    connection: sqlite3.Connection, scope: str, key: str, text: str, now: float, ttl: float | None
) -> str | None:
    connection.execute("BEGIN IMMEDIATE")
    entry = _live(connection, scope, key, now)
    if entry is not None:
        connection.execute("COMMIT")
        return entry[0]
    connection.execute(UPSERT, (scope, key, text, expiry(now, ttl)))
    connection.execute("COMMIT")
    return None


def _append(connection: sqlite3.Connection, scope: str, key: str, item: str, now: float) -> None:
    connection.execute("BEGIN IMMEDIATE")
    entry = _live(connection, scope, key, now)
    if entry is None:
        connection.execute(UPSERT, (scope, key, f"[{item}]", None))
    else:
        try:
            text = append_to_list_text(entry[0], item)
        except NotAList:
            connection.execute("ROLLBACK")
            raise
        connection.execute(UPSERT, (scope, key, text, entry[1]))
    connection.execute("COMMIT")


def _increment(
    connection: sqlite3.Connection, scope: str, key: str, by: int, now: float, ttl: float | None
) -> int:
    connection.execute("BEGIN IMMEDIATE")
    entry = _live(connection, scope, key, now)
    if entry is None:
        total, expires_at = by, expiry(now, ttl)
    else:
        total, expires_at = counter_value(entry[0]) + by, entry[1]
    connection.execute(UPSERT, (scope, key, str(total), expires_at))
    connection.execute("COMMIT")
    return total
