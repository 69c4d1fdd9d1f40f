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

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

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
CREATE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('keel_checkpoints:' || current_schema()))"
COLUMNS = "version, state::text, created_at, status"
_UNAVAILABLE = (OSError, asyncio.TimeoutError, asyncpg.InterfaceError, asyncpg.CannotConnectNowError)


class PostgresBackend:
    def __init__(self, dsn: str, *, pool_max: int = 10, connect_timeout: float = 5.0) -> None:
        self.dsn = dsn
        self.pool_max = pool_max
        self.connect_timeout = connect_timeout
        self._pool: Any = None
        self._opening = asyncio.Lock()

    def describe(self) -> str:
        return f"postgresql (pool of up to {self.pool_max} connections)"

    async def open(self) -> None:
        async with self._opening:
            if self._pool is not None:
                return
            try:
                pool = await asyncpg.create_pool(
                    self.dsn, min_size=1, max_size=self.pool_max, timeout=self.connect_timeout
                )
            except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
                raise CheckpointUnavailableError(
                    f"cannot connect to the checkpoints' PostgreSQL: {exc}"
                ) from exc
            try:
                async with pool.acquire() as connection, connection.transaction():
                    # Concurrent CREATE TABLE IF NOT EXISTS can still collide in PostgreSQL's
                    # catalog when several processes boot together: take turns.
                    await connection.execute(CREATE_LOCK)
                    await connection.execute(SCHEMA)
            except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
                await pool.close()
                raise CheckpointUnavailableError(
                    f"the checkpoints' PostgreSQL cannot create its table: {exc}"
                ) from exc
            except BaseException:
                await pool.close()
                raise
            self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _with(self, work: Callable[[Any], Awaitable[T]]) -> T:
        if self._pool is None:
            await self.open()
        try:
            async with self._pool.acquire() as connection:
                return await work(connection)
        except (asyncpg.UntranslatableCharacterError, asyncpg.InvalidTextRepresentationError) as exc:
            raise CheckpointEncodeError(f"PostgreSQL cannot store this state as JSONB: {exc}") from exc
        except (*_UNAVAILABLE, asyncpg.PostgresConnectionError) as exc:
            raise CheckpointUnavailableError(f"the checkpoints' PostgreSQL is unreachable: {exc}") from exc
        except asyncpg.PostgresError as exc:
            raise CheckpointUnavailableError(
                f"the checkpoints' PostgreSQL refused the operation: {exc}"
            ) from exc

    async def ping(self) -> bool:
        return bool(await self._with(lambda c: c.fetchval("SELECT 1")) == 1)

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
