"""A PostgreSQL database and a Redis key prefix of their own for one scale-out test module.

PostgreSQL: ``CREATE DATABASE keel_scale_<random>`` on the server of ``DATABASE_URL_TEST``
(default ``postgresql://postgres@127.0.0.1:5432/test``), dropped afterwards (``WITH (FORCE)``, so
a process the test killed cannot keep it alive). Redis: the server of ``REDIS_URL_TEST`` (default
``redis://127.0.0.1:6379/0``) under a fresh prefix, every key under it deleted afterwards. Either
server missing skips the module with a reason, or fails it under ``REQUIRE_SERVICES=1``.

Both are plain synchronous context managers (each runs its own short event loop), so a
module-scoped fixture can hold them while every test keeps its own loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.conftest import postgres_base_url, redis_base_url, service_unavailable


def database_url(base: str, database: str) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


@contextmanager
def scale_database() -> Iterator[str]:
    """The URL of a new, empty database on the test server; dropped on exit."""
    base = postgres_base_url()
    name = f"keel_scale_{uuid.uuid4().hex[:12]}"

    async def run(sql: str) -> None:
        connection = await asyncpg.connect(base, timeout=3)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    try:
        asyncio.run(run(f"CREATE DATABASE {name}"))
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        service_unavailable(f"PostgreSQL at {base} is unreachable ({type(exc).__name__}: {exc})")
        raise
    try:
        yield database_url(base, name)
    finally:
        asyncio.run(run(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@contextmanager
def scale_redis() -> Iterator[tuple[str, str]]:
    """``(url, prefix)``: a key prefix nobody else uses; every key under it is deleted on exit."""
    url = redis_base_url()
    prefix = f"keel-scale-{uuid.uuid4().hex[:12]}:"

    async def ping() -> None:
        client = aioredis.Redis.from_url(url, socket_connect_timeout=3)
        try:
            await client.ping()
        finally:
            await client.aclose()

    async def clean() -> None:
        client = aioredis.Redis.from_url(url, socket_connect_timeout=3)
        try:
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()

    try:
        asyncio.run(ping())
    except (RedisError, OSError) as exc:
        service_unavailable(f"Redis at {url} is unreachable ({type(exc).__name__}: {exc})")
        raise
    try:
        yield url, prefix
    finally:
        asyncio.run(clean())
