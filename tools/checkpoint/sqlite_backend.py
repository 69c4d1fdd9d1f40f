"""Checkpoints in a SQLite file (by default the ``db`` tool's own database file).

Table ``keel_checkpoints (run_id, version, state, created_at, status)``, primary key
``(run_id, version)``, created on first use. A save is one ``BEGIN IMMEDIATE`` transaction (SQLite's
write lock, so producers in other processes queue behind it): read the run's latest version, refuse
a version that is not above it, insert, prune to the newest ``keep``. The file is opened in WAL
mode with a busy timeout, so it shares the file with the ``db`` tool's connections.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from core.sqlite_thread import SqliteFile

from .backend import Row, as_row
from .errors import CheckpointConflict, CheckpointUnavailableError

SCHEMA = """
CREATE TABLE IF NOT EXISTS keel_checkpoints (
    run_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (run_id, version)
) WITHOUT ROWID
"""
COLUMNS = "version, state, created_at, status"


class SqliteBackend:
    def __init__(self, path: str, *, busy_timeout: float = 5.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._file = SqliteFile(
            path,
            schema=SCHEMA,
            busy_timeout=busy_timeout,
            thread_name="keel-checkpoint-sqlite",
            label="the checkpoints",
            unavailable=CheckpointUnavailableError,
        )

    def describe(self) -> str:
        return self._file.describe()

    async def open(self) -> None:
        await self._file.open()

    async def close(self) -> None:
        await self._file.close()

    async def ping(self) -> bool:
        return await self._file.ping()

    async def save(self, run_id: str, row: Row, keep: int) -> None:
        await self._file.run(_save, run_id, row, keep)

    async def latest(self, run_id: str) -> Row | None:
        sql = f"SELECT {COLUMNS} FROM keel_checkpoints WHERE run_id = ? ORDER BY version DESC LIMIT 1"
        return await self._file.run(_one, sql, (run_id,))  # type: ignore[no-any-return]

    async def at_version(self, run_id: str, version: int) -> Row | None:
        sql = f"SELECT {COLUMNS} FROM keel_checkpoints WHERE run_id = ? AND version = ?"
        return await self._file.run(_one, sql, (run_id, version))  # type: ignore[no-any-return]

    async def list_versions(self, run_id: str) -> list[int]:
        sql = "SELECT version FROM keel_checkpoints WHERE run_id = ? ORDER BY version"
        rows = await self._file.run(lambda c: c.execute(sql, (run_id,)).fetchall())
        return [int(r[0]) for r in rows]

    async def delete(self, run_id: str) -> None:
        await self._file.run(lambda c: c.execute("DELETE FROM keel_checkpoints WHERE run_id = ?", (run_id,)))


def _one(connection: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> Row | None:
    record = connection.execute(sql, params).fetchone()
    return None if record is None else as_row(record)


def _save(connection: sqlite3.Connection, run_id: str, row: Row, keep: int) -> None:
    connection.execute("BEGIN IMMEDIATE")
    latest = connection.execute(
        "SELECT max(version) FROM keel_checkpoints WHERE run_id = ?", (run_id,)
    ).fetchone()[0]
    if row.version < 1 or (latest is not None and row.version <= latest):
        connection.execute("ROLLBACK")
        raise CheckpointConflict(run_id, row.version, latest)
    connection.execute(
        "INSERT INTO keel_checkpoints (run_id, version, state, created_at, status) VALUES (?, ?, ?, ?, ?)",
        (run_id, row.version, row.state, row.created_at, row.status),
    )
    if keep:
        connection.execute(
            "DELETE FROM keel_checkpoints WHERE run_id = ? AND version <= ("
            "SELECT version FROM keel_checkpoints WHERE run_id = ? ORDER BY version DESC LIMIT 1 OFFSET ?)",
            (run_id, run_id, keep),
        )
    connection.execute("COMMIT")
