"""Checkpoints in PostgreSQL, the state as ``JSONB``.

Table ``keel_checkpoints (run_id, version, state JSONB, created_at, status)``, primary key
``(run_id, version)``, created on first use (under an advisory lock, so processes booting
together on a fresh database do not trip over each other's ``CREATE TABLE``). A save is one
transaction that first takes a transaction-scoped advisory lock on the run id, so producers of
one run (in any process) are serialised while different runs never wait for each other; then it
reads the latest version, refuses a version that is not above it, inserts and prunes to the
newest ``keep``.

A server that cannot be reached, or that refuses to create the table (no schema to create it in,
no privilege), is ``CheckpointUnavailableError``; the next call connects (and tries the table) again.

``JSONB`` keeps the document, not its spelling: object keys may come back in another order, and a
string holding ``\\u0000`` cannot be stored (refused as ``CheckpointEncodeError``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from tools._shared.pg_pool import PgBackend

from .backend import Row, as_row
from .errors import CheckpointConflict, CheckpointEncodeError, CheckpointUnavailableError

T = TypeVar("T")
SCHEMA = """
CREATE TABLE IF NOT EXISTS keel_checkpoints (
    run_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    state JSONB NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (run_id, version)
)
"""
COLUMNS = "version, state::text, created_at, status"


class PostgresBackend(PgBackend):
    table = "keel_checkpoints"
    schema = SCHEMA
    owner = "the checkpoints' PostgreSQL"
    unavailable = CheckpointUnavailableError

    async def _with(self, work: Callable[[Any], Awaitable[T]]) -> T:
        async def encoded(connection: Any) -> T:
            try:
                return await work(connection)
            except (asyncpg.UntranslatableCharacterError, asyncpg.InvalidTextRepresentationError) as exc:
                raise CheckpointEncodeError(f"PostgreSQL cannot store this state as JSONB: {exc}") from exc

        return await super()._with(encoded)

    async def save(self, run_id: str, row: Row, keep: int) -> None:
        async def work(connection: Any) -> None:
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", run_id)
                latest = await connection.fetchval(
                    "SELECT max(version) FROM keel_checkpoints WHERE run_id = $1", run_id
                )
                if row.version < 1 or (latest is not None and row.version <= latest):
                    raise CheckpointConflict(run_id, row.version, latest)
                await connection.execute(
                    "INSERT INTO keel_checkpoints (run_id, version, state, created_at, status) "
                    "VALUES ($1, $2, $3::jsonb, $4, $5)",
                    run_id,
                    row.version,
                    row.state,
                    row.created_at,
                    row.status,
                )
                if keep:
                    await connection.execute(
                        "DELETE FROM keel_checkpoints WHERE run_id = $1 AND version <= ("
                        "SELECT version FROM keel_checkpoints WHERE run_id = $1 "
                        "ORDER BY version DESC LIMIT 1 OFFSET $2)",
                        run_id,
                        keep,
                    )

        await self._with(work)

    async def latest(self, run_id: str) -> Row | None:
        sql = f"SELECT {COLUMNS} FROM keel_checkpoints WHERE run_id = $1 ORDER BY version DESC LIMIT 1"
        return await self._one(sql, run_id)

    async def at_version(self, run_id: str, version: int) -> Row | None:
        sql = f"SELECT {COLUMNS} FROM keel_checkpoints WHERE run_id = $1 AND version = $2"
        return await self._one(sql, run_id, version)

    async def _one(self, sql: str, *params: Any) -> Row | None:
        record = await self._with(lambda c: c.fetchrow(sql, *params))
        return None if record is None else as_row(record)

    async def list_versions(self, run_id: str) -> list[int]:
        sql = "SELECT version FROM keel_checkpoints WHERE run_id = $1 ORDER BY version"
        records = await self._with(lambda c: c.fetch(sql, run_id))
        return [int(r[0]) for r in records]

    async def delete(self, run_id: str) -> None:
        await self._with(lambda c: c.execute("DELETE FROM keel_checkpoints WHERE run_id = $1", run_id))
