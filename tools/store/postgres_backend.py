"""``postgresql://...``: the store in a PostgreSQL table, shared by every Keel process.

The same table as on SQLite, ``keel_store (scope, k, value, expires_at)``, created on first use
(``CREATE TABLE IF NOT EXISTS`` under an advisory lock, so processes booting together on a fresh
database do not collide in PostgreSQL's catalog); ``value`` is the JSON text exactly as encoded
(``TEXT``, so it reads back byte for byte) and ``expires_at`` a unix time. Reads and plain writes
are one statement on a pooled connection. A read-modify-write (``add``, ``append``, ``increment``)
runs in a transaction that locks the row (``SELECT ... FOR UPDATE``); when the row does not exist
yet it is inserted with ``ON CONFLICT DO NOTHING``, and if another process inserted it first the
row is read again, now locked, so concurrent increments from several processes never lose an
update.

A server that cannot be reached, a connection lost mid-call, or a server that refuses to create
the table (no schema to create it in, no privilege) is ``StoreBackendUnavailable``; the next call
connects (and tries the table) again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from time import time
from typing import Any, TypeVar

from tools._shared.pg_pool import PgBackend

from .backend import append_to_list_text, counter_value, expiry
from .errors import StoreBackendUnavailable

T = TypeVar("T")
SWEEP_SECONDS = 60.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS keel_store (
    scope TEXT NOT NULL,
    k TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at DOUBLE PRECISION,
    PRIMARY KEY (scope, k)
)
"""
SELECT = "SELECT value, expires_at FROM keel_store WHERE scope = $1 AND k = $2"
LOCK = SELECT + " FOR UPDATE"
UPSERT = (
    "INSERT INTO keel_store (scope, k, value, expires_at) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (scope, k) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
)
INSERT_NEW = (
    "INSERT INTO keel_store (scope, k, value, expires_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
)
UPDATE = "UPDATE keel_store SET value = $3, expires_at = $4 WHERE scope = $1 AND k = $2"


class PostgresBackend(PgBackend):
    table = "keel_store"
    schema = SCHEMA
    owner = "the store's PostgreSQL"
    unavailable = StoreBackendUnavailable

    def __init__(
        self, dsn: str, *, pool_max: int = 10, connect_timeout: float = 5.0, clock: Callable[[], float] = time
    ) -> None:
        super().__init__(dsn, pool_max=pool_max, connect_timeout=connect_timeout)
        self._clock = clock
        self._last_sweep = 0.0

    async def lookup(self, scope: str, key: str) -> str | None:
        now = self._clock()

        async def work(connection: Any) -> str | None:
            row = await connection.fetchrow(SELECT, scope, key)
            return _text_if_live(row, now)

        return await self._with(work)

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None:
        now = self._clock()
        sweep = self._sweep_due(now)

        async def work(connection: Any) -> None:
            await connection.execute(UPSERT, scope, key, text, expiry(now, ttl))
            if sweep:
                await connection.execute("DELETE FROM keel_store WHERE expires_at <= $1", now)

        await self._with(work)

    async def delete(self, scope: str, key: str) -> None:
        await self._with(
            lambda c: c.execute("DELETE FROM keel_store WHERE scope = $1 AND k = $2", scope, key)
        )

    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        now = self._clock()

        async def change(current: str | None) -> tuple[str | None, str | None, bool]:
            if current is not None:
                return None, current, False
            return text, None, True

        result: str | None = await self._modify(scope, key, now, ttl, change)
        return result

    async def append(self, scope: str, key: str, item: str) -> None:
        now = self._clock()

        async def change(current: str | None) -> tuple[str | None, None, bool]:
            if current is None:
                return f"[{item}]", None, True
            return append_to_list_text(current, item), None, False

        await self._modify(scope, key, now, None, change)

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        now = self._clock()

        async def change(current: str | None) -> tuple[str, int, bool]:
            if current is None:
                return str(by), by, True
            total = counter_value(current) + by
            return str(total), total, False

        result: int = await self._modify(scope, key, now, ttl, change)
        return result

    async def _modify(
        self,
        scope: str,
        key: str,
        now: float,
        ttl: float | None,
        change: Callable[[str | None], Awaitable[tuple[str | None, Any, bool]]],
    ) -> Any:
        """Lock the row, let ``change`` decide (new text or ``None`` to leave it, the result, whether the
        entry is new and takes ``ttl``), write, commit; a missing row is inserted race-free."""

        async def work(connection: Any) -> Any:
            for _ in range(5):
                async with connection.transaction():
                    row = await connection.fetchrow(LOCK, scope, key)
                    current = _text_if_live(row, now)
                    text, result, fresh = await change(current)
                    if text is None:
                        return result
                    expires_at = expiry(now, ttl) if fresh else row["expires_at"]
                    if row is not None:
                        await connection.execute(UPDATE, scope, key, text, expires_at)
                        return result
                    status = await connection.execute(INSERT_NEW, scope, key, text, expires_at)
                    if status.endswith(" 1"):
                        return result
                # Another process inserted the row between our read and our insert: read it again.
            raise StoreBackendUnavailable(f"the store kept losing the race to create {key!r}")

        return await self._with(work)

    def _sweep_due(self, now: float) -> bool:
        if now - self._last_sweep < SWEEP_SECONDS:
            return False
        self._last_sweep = now
        return True


def _text_if_live(row: Any, now: float) -> str | None:
    if row is None:
        return None
    expires_at = row["expires_at"]
    if expires_at is not None and now >= expires_at:
        return None
    return str(row["value"])
