"""Scheduler fixtures: a fake clock, and any number of ``scheduler`` tools ("processes") sharing one
database, on SQLite and on PostgreSQL (the ``engine`` parameter)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATABASE_ENGINES, database_url
from tests.kit import bound_tool
from tools.scheduler.scheduler_tool import SchedulerTool

T0 = 1_800_000_000.0  # 2027-01-15, a fixed "now" for the fake clock


class FakeClock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def scheduler_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("SCHEDULER_", "DATABASE_URL"))]:
        if name != "DATABASE_URL_TEST":
            monkeypatch.delenv(name)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=DATABASE_ENGINES)
async def scheduler_url(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    async with database_url(request.param, "data/scheduler.db") as url:
        monkeypatch.setenv("SCHEDULER_URL", url)
        yield url


Start = Callable[..., Any]


@pytest.fixture
async def start(scheduler_url: str, tmp_path: Path) -> AsyncIterator[Start]:
    """``await start(clock=None)``: a new set-up scheduler tool on the shared database (shut down at the
    end of the test unless the test already did)."""
    async with AsyncExitStack() as stack:

        async def make(clock: Callable[[], float] | None = None) -> SchedulerTool:
            tool = bound_tool(SchedulerTool, tmp_path)
            await tool.setup()
            stack.push_async_callback(tool.shutdown)
            if clock is not None:
                tool.clock = clock
            return tool

        yield make
