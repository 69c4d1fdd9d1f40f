"""Fixtures shared by the whole suite, and the real services some tests need.

PostgreSQL comes from ``DATABASE_URL_TEST`` (default: the local server's ``test`` database); each use
gets a fresh schema, first on the ``search_path`` in the URL, dropped afterwards. Redis comes from
``REDIS_URL_TEST`` (default: the local server, database 0); each use gets a key prefix of its own,
and every key under it is deleted afterwards. Either server missing skips the test with the reason,
or fails it when ``REQUIRE_SERVICES=1`` (CI).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import coverage
import pytest
from hypothesis import settings

# Under coverage (`make test`) the tracer slows each example about 1.5 times, so Hypothesis's 200 ms
# deadline would time the tracer, not the code, and fail a correct test on a busy machine.
settings.register_profile("coverage", deadline=None)
if coverage.Coverage.current() is not None:
    settings.load_profile("coverage")

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def require_services() -> bool:
    """CI sets REQUIRE_SERVICES=1: a missing PostgreSQL or Redis then fails instead of skipping."""
    return os.environ.get("REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


def service_unavailable(reason: str) -> None:
    """Skip with a reason, or fail when services are required."""
    if require_services():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


_PROJECT_PACKAGES = ("tools", "domains")


@pytest.fixture(autouse=True)
def _project_modules_restored() -> Iterator[None]:
    """Booting a temporary root rebinds ``tools.*`` / ``domains.*`` in ``sys.modules`` to that root's
    files (see core.loader); put the project's own modules back so later imports find them."""
    saved = {name: module for name, module in sys.modules.items() if _is_project_module(name)}
    yield
    for name in [name for name in sys.modules if _is_project_module(name)]:
        if sys.modules[name] is not saved.get(name):
            del sys.modules[name]
    sys.modules.update(saved)


def _is_project_module(name: str) -> bool:
    return name.split(".", 1)[0] in _PROJECT_PACKAGES


# -- real services --------------------------------------------------------------------------------


def postgres_base_url() -> str:
    return os.environ.get("DATABASE_URL_TEST", "").strip() or DEFAULT_POSTGRES_URL


def redis_base_url() -> str:
    return os.environ.get("REDIS_URL_TEST", "").strip() or DEFAULT_REDIS_URL


@asynccontextmanager
async def fresh_postgres_schema() -> AsyncIterator[str]:
    """A PostgreSQL URL whose connections use a schema no other test uses; dropped on exit."""
    import asyncpg

    base = postgres_base_url()
    try:
        connection = await asyncpg.connect(base, timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        service_unavailable(f"PostgreSQL at {base} is unreachable ({type(exc).__name__}: {exc})")
        raise  # service_unavailable skips or fails; never reached
    schema = f"keel_test_{uuid.uuid4().hex[:12]}"
    try:
        await connection.execute(f"CREATE SCHEMA {schema}")
        yield f"{base}{'&' if '?' in base else '?'}search_path={schema}"
    finally:
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await connection.close()


DATABASE_ENGINES = ("sqlite", "postgres")
"""The engines the ``db`` tool runs on; parametrize over these and open each with :func:`database_url`."""


@asynccontextmanager
async def database_url(engine: str, sqlite_file: str = "data/test.db") -> AsyncIterator[str]:
    """A ``DATABASE_URL`` on a fresh database of ``engine``: a SQLite file relative to the project root,
    or a PostgreSQL schema of its own (see :func:`fresh_postgres_schema`)."""
    if engine == "sqlite":
        yield f"sqlite:///{sqlite_file}"
    elif engine == "postgres":
        async with fresh_postgres_schema() as url:
            yield url
    else:
        raise ValueError(f"unknown database engine {engine!r}; use one of {DATABASE_ENGINES}")


class RedisNamespace(NamedTuple):
    url: str
    prefix: str


@asynccontextmanager
async def fresh_redis_namespace() -> AsyncIterator[RedisNamespace]:
    """A Redis URL and a key prefix no other test uses; every key under the prefix is deleted on exit."""
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    url = redis_base_url()
    client = aioredis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        service_unavailable(f"Redis at {url} is unreachable ({type(exc).__name__}: {exc})")
        raise  # service_unavailable skips or fails; never reached
    prefix = f"keel-test-{uuid.uuid4().hex[:12]}:"
    try:
        yield RedisNamespace(url, prefix)
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A PostgreSQL URL on a fresh schema (see :func:`fresh_postgres_schema`)."""
    async with fresh_postgres_schema() as url:
        yield url


@pytest.fixture
async def redis_namespace() -> AsyncIterator[RedisNamespace]:
    """``(url, prefix)`` on the test Redis (see :func:`fresh_redis_namespace`)."""
    async with fresh_redis_namespace() as namespace:
        yield namespace
