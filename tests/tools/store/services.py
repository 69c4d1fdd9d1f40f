"""Real PostgreSQL and Redis for the store, checkpoint and agents suites (and the agent-tools bench).

The services themselves, isolated per use and skipped (or failed under ``REQUIRE_SERVICES=1``) when
missing, are ``tests/conftest.py``'s; this module names them as these suites use them and adds what
the store and checkpoint suites both need: a database that refuses to create tables, and several
"processes" setting up at once.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import asyncpg

from core.base_tool import BaseTool
from tests.conftest import fresh_postgres_schema as postgres_url
from tests.conftest import fresh_redis_namespace as redis_namespace
from tests.conftest import postgres_base_url

__all__ = ["postgres_url", "redis_namespace", "schema_created_later", "set_up_together"]


@asynccontextmanager
async def schema_created_later() -> AsyncIterator[tuple[str, Callable[[], Awaitable[None]]]]:
    """``(url, create)``: a URL whose ``search_path`` names a schema that does not exist yet (so
    PostgreSQL refuses ``CREATE TABLE``), and a function that creates it; dropped on exit."""
    async with postgres_url() as url:
        schema = f"keel_later_{uuid.uuid4().hex[:12]}"
        admin = await asyncpg.connect(postgres_base_url())

        async def create() -> None:
            await admin.execute(f"CREATE SCHEMA {schema}")

        try:
            yield re.sub(r"search_path=[^&]*", f"search_path={schema}", url), create
        finally:
            await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await admin.close()


async def set_up_together(tools: Sequence[BaseTool]) -> list[BaseException]:
    """Set ``tools`` up all at once (processes booting together), shut them down; what setups raised."""
    outcomes = await asyncio.gather(*(tool.setup() for tool in tools), return_exceptions=True)
    for tool in tools:
        await tool.shutdown()
    return [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
