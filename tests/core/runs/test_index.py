"""Run leases in ``agent_runs``, on SQLite and PostgreSQL: one holder at a time, renewals, expiry,
release, and a claim that only one of several processes can win.

Each ``RunIndex`` stands for one process (its own owner id). An expired lease is made directly with
a negative ``lease_seconds`` (the lease ends before it starts), so no test waits for a clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.runs.index import RunIndex
from tests.conftest import fresh_postgres_schema
from tests.kit import PROJECT, started_tool
from tools.db.db_tool import DbTool


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """The ``db`` tool with the agents domain's migrations applied, on each engine."""
    root = tmp_path / "root"
    (root / "migrations").mkdir(parents=True)
    (root / "migrations" / "agents").symlink_to(PROJECT / "migrations" / "agents", target_is_directory=True)
    if request.param == "sqlite":
        monkeypatch.setenv("DATABASE_URL", "sqlite:///data/leases.db")
        async with started_tool(DbTool, root) as tool:
            yield tool
        return
    async with fresh_postgres_schema() as url:
        monkeypatch.setenv("DATABASE_URL", url)
        async with started_tool(DbTool, root) as tool:
            yield tool


def process(db: Any, name: str, lease_seconds: float = 60.0) -> RunIndex:
    return RunIndex(db, owner=f"host:{name}:x", lease_seconds=lease_seconds)


async def test_a_started_run_is_leased_to_its_process_and_nobody_else_can_claim_it(db: Any) -> None:
    a, b = process(db, "a"), process(db, "b")
    await a.add("run-1", "ops", 1.0)
    assert await b.claimable() == []
    assert not await b.claim("run-1")
    assert await a.renew(["run-1"]) == {"run-1"}


async def test_an_expired_lease_is_claimed_by_exactly_one_process(db: Any) -> None:
    dying = process(db, "dying", lease_seconds=-1.0)  # its lease is over as soon as it is taken
    await dying.add("run-1", "ops", 1.0)
    contenders = [process(db, name) for name in ("b", "c", "d")]
    assert await contenders[0].claimable() == [("run-1", "ops")]

    won = await asyncio.gather(*(index.claim("run-1") for index in contenders))

    assert sorted(won) == [False, False, True]
    assert await dying.renew(["run-1"]) == set()  # the old holder learns it lost the run
    winner = contenders[won.index(True)]
    assert await winner.renew(["run-1"]) == {"run-1"}
    assert await contenders[won.index(True) - 1].claimable() == []


async def test_a_released_lease_can_be_claimed_at_once(db: Any) -> None:
    a, b = process(db, "a"), process(db, "b")
    await a.add("run-1", "ops", 1.0)
    await a.add("run-2", "ops", 2.0)
    await a.release(["run-1"])
    assert await b.claimable() == [("run-1", "ops")]
    await a.release()
    assert await b.claimable() == [("run-1", "ops"), ("run-2", "ops")]
    assert await b.claim("run-2")
    assert await b.claimable() == [("run-1", "ops")]


async def test_a_run_that_ended_is_never_claimed(db: Any) -> None:
    a, b = process(db, "a", lease_seconds=-1.0), process(db, "b")
    await a.add("run-1", "ops", 1.0)
    await a.set_status("run-1", "completed")
    assert await b.claimable() == []
    assert not await b.claim("run-1")
    assert await a.renew(["run-1"]) == set()
