"""The PostgreSQL pool the store, the checkpoints and the scheduler keep their tables in.

Each opens an asyncpg pool on first use, creates its tables under a transaction-scoped advisory
lock (concurrent ``CREATE TABLE IF NOT EXISTS`` still collides in PostgreSQL's catalog when several
processes boot together, so they take turns), and turns every way the server can fail into the
tool's own "unavailable" error; the next call then connects (and tries the tables) again. That
bootstrap lives here once; each tool keeps its schema, its SQL and its error class.

``tools/_shared`` is the one folder every tool may import (tests/core/test_core_purity.py); it
defines no tool, so boot imports it and finds nothing to construct.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar

import asyncpg

T = TypeVar("T")

UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
)


def create_lock(table: str) -> str:
    """The advisory lock that serialises creating ``table`` in the current schema."""
    return f"SELECT pg_advisory_xact_lock(hashtext('{table}:' || current_schema()))"


class PgPool:
    """A lazily opened pool whose first open creates the table ``schema`` describes (or the tables:
    a sequence of statements, run in order in the one transaction).

    ``table`` names the advisory lock taken to create them; ``owner`` names the server in messages
    ("the store's PostgreSQL"); ``unavailable`` is the error raised for anything the server does
    wrong, so the caller's tool can report it as its own.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str,
        schema: str | Sequence[str],
        owner: str,
        unavailable: Callable[[str], Exception],
        pool_max: int = 10,
        connect_timeout: float = 5.0,
    ) -> None:
        self.dsn = dsn
        self.table = table
        self.schema = (schema,) if isinstance(schema, str) else tuple(schema)
        self.owner = owner
        self.unavailable = unavailable
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
            except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
                raise self.unavailable(f"cannot connect to {self.owner}: {exc}") from exc
            try:
                async with pool.acquire() as connection, connection.transaction():
                    await connection.execute(create_lock(self.table))
                    for statement in self.schema:
                        await connection.execute(statement)
            except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
                await pool.close()
                tables = "table" if len(self.schema) == 1 else "tables"
                raise self.unavailable(f"{self.owner} cannot create its {tables}: {exc}") from exc
            except BaseException:
                await pool.close()
                raise
            self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A pooled connection, opening the pool first if need be; losing the server, while
        acquiring it or while using it, is ``unavailable``. What the server refuses (any other
        ``asyncpg.PostgresError``) is the caller's to handle."""
        if self._pool is None:
            await self.open()
        try:
            async with self._pool.acquire() as connection:
                yield connection
        except (*UNAVAILABLE, asyncpg.PostgresConnectionError) as exc:
            raise self.unavailable(f"{self.owner} is unreachable: {exc}") from exc

    async def run(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(connection)`` on a pooled :meth:`connection`; a refusal is ``unavailable`` too."""
        try:
            async with self.connection() as connection:
                return await work(connection)
        except asyncpg.PostgresError as exc:
            raise self.unavailable(f"{self.owner} refused the operation: {exc}") from exc


class PgBackend:
    """A tool's PostgreSQL backend on one :class:`PgPool`: the subclass names its table, schema,
    server and error (the class attributes, as :class:`PgPool` takes them); describing, opening,
    closing and pinging the server are the pool's, the same for every tool."""

    table: ClassVar[str]
    schema: ClassVar[str | Sequence[str]]
    owner: ClassVar[str]
    unavailable: ClassVar[type[Exception]]

    def __init__(self, dsn: str, *, pool_max: int = 10, connect_timeout: float = 5.0) -> None:
        self._pool = PgPool(
            dsn,
            table=self.table,
            schema=self.schema,
            owner=self.owner,
            unavailable=self.unavailable,
            pool_max=pool_max,
            connect_timeout=connect_timeout,
        )

    def describe(self) -> str:
        return self._pool.describe()

    async def open(self) -> None:
        await self._pool.open()

    async def close(self) -> None:
        await self._pool.close()

    async def _with(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(connection)`` on the pool (:meth:`PgPool.run`); a subclass may wrap it."""
        return await self._pool.run(work)

    async def ping(self) -> bool:
        return bool(await self._with(lambda c: c.fetchval("SELECT 1")) == 1)
