"""What only the PostgreSQL engine has: a server that can go away and come back, and other processes.

An unreachable server makes ``db`` DEAD through the ToolProxy (``DatabaseUnavailableError`` is a
``ToolUnavailableError``), and the next call that reaches it again marks it OK ("Recovered"). The
outage is a loopback relay in front of the real server, switched off and on by the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.errors import ToolUnavailableError
from tests.kit import booted, bound_tool, make_root
from tests.tools.db.db_fixtures import Forwarder, target_of, through, write_migration
from tools.db.db_tool import DbTool


def status(kernel: object) -> dict[str, object]:
    tools: dict[str, dict[str, object]] = kernel.registry.get_system_dump()["tools"]  # type: ignore[attr-defined]
    return tools["db"]


async def test_unreachable_at_boot_is_dead_then_recovers_and_migrates(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay = Forwarder(*target_of(postgres_url))
    monkeypatch.setenv("DATABASE_URL", through(postgres_url, relay.port))
    monkeypatch.setenv("DB_CONNECT_TIMEOUT", "2")
    root = make_root(tmp_path, tools=("db",))
    write_migration(root, "demo/001_things.sql", "CREATE TABLE things (id INTEGER PRIMARY KEY);")
    async with booted(root) as kernel:
        assert status(kernel)["status"] == "DEAD"
        assert "unavailable" in str(status(kernel)["message"])
        db = kernel.container.get("db")
        with pytest.raises(ToolUnavailableError):
            await db.scalar("SELECT 1")
        await relay.start()
        try:
            assert await db.scalar("SELECT count(*) FROM things") == 0  # migrated on the way up
            assert (status(kernel)["status"], status(kernel)["message"]) == ("OK", "Recovered")
        finally:
            await kernel.shutdown()
            await relay.stop()


async def test_an_outage_while_serving_is_dead_until_the_server_returns(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay = Forwarder(*target_of(postgres_url))
    await relay.start()
    monkeypatch.setenv("DATABASE_URL", through(postgres_url, relay.port))
    monkeypatch.setenv("DB_CONNECT_TIMEOUT", "2")
    root = make_root(tmp_path, tools=("db",))
    try:
        async with booted(root) as kernel:
            db = kernel.container.get("db")
            assert await db.scalar("SELECT 1") == 1
            assert status(kernel)["status"] == "OK"
            await relay.stop()
            with pytest.raises(ToolUnavailableError) as caught:
                async with db.transaction():
                    pass
            assert caught.value.kind == "unavailable"  # type: ignore[attr-defined]
            assert status(kernel)["status"] == "DEAD"
            with pytest.raises(ToolUnavailableError):
                await db.scalar("SELECT 1")
            await relay.start()
            assert await db.scalar("SELECT 1") == 1
            assert (status(kernel)["status"], status(kernel)["message"]) == ("OK", "Recovered")
    finally:
        await relay.stop()


async def test_pool_size_bounds_concurrent_transactions_without_errors(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", postgres_url)
    monkeypatch.setenv("DB_POOL_MAX", "2")
    root = tmp_path / "root"
    root.mkdir()
    tool = bound_tool(DbTool, root)
    await tool.setup()
    try:
        await tool.execute("CREATE TABLE hits (n INTEGER NOT NULL)")

        async def hit() -> None:
            async with tool.transaction():
                await tool.execute("INSERT INTO hits (n) VALUES (1)")

        await asyncio.gather(*(hit() for _ in range(20)))
        assert await tool.scalar("SELECT count(*) FROM hits") == 20
    finally:
        await tool.shutdown()
