"""Helpers the db tests share: engines to run against, and temporary roots the kernel can boot.

PostgreSQL comes from ``DATABASE_URL_TEST`` (default: the local server's ``test`` database). Each
test gets its own schema (``search_path`` in the URL), dropped afterwards, so parallel runs and
other suites sharing the database never see each other's tables.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from core.registry import Registry
from tests.conftest import service_unavailable
from tests.kit import PROJECT, make_root
from tools.db.db_tool import DbTool

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pg_base_url() -> str:
    return os.environ.get("DATABASE_URL_TEST", "").strip() or DEFAULT_PG_URL


def with_search_path(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


async def require_postgres() -> str:
    """The base URL, or skip (fail under REQUIRE_SERVICES=1) when the server is not there."""
    url = pg_base_url()
    try:
        connection = await asyncpg.connect(url, timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        service_unavailable(f"PostgreSQL at {url} is unreachable ({type(exc).__name__}: {exc})")
        raise  # service_unavailable skips or fails; this line is never reached
    await connection.close()
    return url


@asynccontextmanager
async def pg_schema() -> AsyncIterator[str]:
    """A fresh schema for one test; yields a DATABASE_URL that uses it."""
    base = await require_postgres()
    schema = f"keel_test_{uuid.uuid4().hex[:12]}"
    connection = await asyncpg.connect(base)
    try:
        await connection.execute(f"CREATE SCHEMA {schema}")
        yield with_search_path(base, schema)
    finally:
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await connection.close()


def new_tool(project_root: Path) -> DbTool:
    tool = DbTool()
    registry = Registry()
    registry.register_tool(DbTool.name)
    tool.bind(project_root=project_root, registry=registry)
    return tool


@asynccontextmanager
async def started_tool(project_root: Path) -> AsyncIterator[DbTool]:
    """A ``DbTool`` set up from the current environment, shut down afterwards."""
    tool = new_tool(project_root)
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()


def linked_root(
    tmp_path: Path, *, tools: Iterable[str] = ("db",), domains: Iterable[str] = (), name: str = "root"
) -> Path:
    """A project root linking the named tools file by file (``rglob`` skips linked folders)."""
    root = make_root(tmp_path, domains=domains, name=name)
    for tool in tools:
        source = PROJECT / "tools" / tool
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            target = root / "tools" / tool / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    return root


def write_migration(root: Path, name: str, sql: str) -> Path:
    path = root / "migrations" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sql, encoding="utf-8")
    return path
