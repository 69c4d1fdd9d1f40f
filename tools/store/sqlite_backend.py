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

import sqlite3
import time
from collections.abc import Callable

from core.sqlite_thread import SqliteFile

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
        self._file = SqliteFile(
            path,
            schema=SCHEMA,
            busy_timeout=busy_timeout,
            thread_name="keel-store-sqlite",
            label="the store",
            unavailable=StoreBackendUnavailable,
        )
        self._last_sweep = 0.0

    def describe(self) -> str:
        return self._file.describe()

    async def open(self) -> None:
        await self._file.open()

    async def close(self) -> None:
        await self._file.close()

    async def ping(self) -> bool:
        return await self._file.ping()

    async def lookup(self, scope: str, key: str) -> str | None:
        return await self._file.run(_lookup, scope, key, self._clock())  # type: ignore[no-any-return]

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None:
        await self._file.run(_put, scope, key, text, expiry(self._clock(), ttl), self._sweep_due())

    async def delete(self, scope: str, key: str) -> None:
        await self._file.run(
            lambda c: c.execute("DELETE FROM keel_store WHERE scope = ? AND k = ?", (scope, key))
        )

    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        return await self._file.run(_add, scope, key, text, self._clock(), ttl)  # type: ignore[no-any-return]

    async def append(self, scope: str, key: str, item: str) -> None:
        await self._file.run(_append, scope, key, item, self._clock())

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        return await self._file.run(_increment, scope, key, by, self._clock(), ttl)  # type: ignore[no-any-return]

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


def _delete(connection: sqlite3.Connection, scope: str, key: str) -> None:
    connection.execute("DELETE FROM keel_store WHERE scope = ? AND k = ?", (scope, key))
