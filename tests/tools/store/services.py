"""Real PostgreSQL and Redis for the store, checkpoint and agents suites, isolated per test.

PostgreSQL comes from ``DATABASE_URL_TEST`` (default: the local server's ``test`` database); each
use gets a fresh schema, put first on the ``search_path`` in the URL and dropped afterwards. Redis
comes from ``REDIS_URL_TEST`` (default: the local server, database 0); each use gets a unique key
prefix, and every key under it is deleted afterwards. Either server missing skips the test with a
reason (``tests.conftest.service_unavailable``), or fails it under ``REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.conftest import service_unavailable

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def pg_base_url() -> str:
    return os.environ.get("DATABASE_URL_TEST", "").strip() or DEFAULT_PG_URL


def redis_base_url() -> str:
    return os.environ.get("REDIS_URL_TEST", "").strip() or DEFAULT_REDIS_URL


@asynccontextmanager
async def postgres_url() -> AsyncIterator[str]:
    """A URL whose connections use a fresh schema of their own."""
    base = pg_base_url()
    try:
        connection = await asyncpg.connect(base, timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        service_unavailable(f"PostgreSQL at {base} is unreachable ({type(exc).__name__}: {exc})")
        raise
    schema = f"keel_test_{uuid.uuid4().hex[:12]}"
    try:
        await connection.execute(f"CREATE SCHEMA {schema}")
        yield f"{base}{'&' if '?' in base else '?'}search_path={schema}"
    finally:
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await connection.close()


@asynccontextmanager
async def redis_namespace() -> AsyncIterator[tuple[str, str]]:
    """``(url, prefix)``: a key prefix no other test uses; its keys are deleted afterwards."""
    url = redis_base_url()
    client = aioredis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        service_unavailable(f"Redis at {url} is unreachable ({type(exc).__name__}: {exc})")
        raise
    prefix = f"keel-test-{uuid.uuid4().hex[:12]}:"
    try:
        yield url, prefix
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
