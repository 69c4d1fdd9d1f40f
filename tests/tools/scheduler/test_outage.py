"""A scheduler whose database cannot be reached at boot still serves (FAIL, not DEAD), retries every
pass, and fires what is due once the database is back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core.registry import ToolStatus
from tests.kit import bound_tool, until
from tools.scheduler.scheduler_tool import SchedulerTool


async def test_an_unreachable_database_at_boot_is_retried_until_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "dbdir"
    blocker.write_text("a file where the database's folder should be")
    monkeypatch.setenv("SCHEDULER_URL", "sqlite:///dbdir/scheduler.db")
    monkeypatch.setenv("SCHEDULER_POLL_SECONDS", "0.05")
    tool = bound_tool(SchedulerTool, tmp_path)
    await tool.setup()  # does not raise
    registry = tool.kernel_registry
    assert registry.tool_status("scheduler") is ToolStatus.FAIL
    ran: list[Any] = []
    tool.every(0.05, ran.append, name="ping")
    stop = asyncio.Event()
    serving = asyncio.ensure_future(tool.serve(stop))
    try:
        await until(lambda: "retrying" in registry.get_system_dump()["tools"]["scheduler"]["message"], "FAIL")
        blocker.unlink()
        await until(lambda: registry.tool_status("scheduler") is ToolStatus.OK, "the scheduler recovers")
        await until(lambda: len(ran) >= 1, "the schedule fires once the database is back")
    finally:
        stop.set()
        await serving
        await tool.shutdown()
