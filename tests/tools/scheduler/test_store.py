"""The scheduler's store: a transaction cancelled at any point committed whole or left nothing behind,
and the next one runs. (A lease renewal is cancelled the moment its job finishes, at whatever point of
its transaction it stands.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tools.scheduler.scheduler_tool import make_database
from tools.scheduler.store import Store

ADD_SCHEDULE = (
    "INSERT INTO keel_sched_schedules (name, spec, plugin, next_due) VALUES ($1, 'every 1s', NULL, 0)"
)


@pytest.fixture
async def store(scheduler_url: str, tmp_path: Path) -> AsyncIterator[Store]:
    db = make_database(scheduler_url, tmp_path)
    await db.open()
    try:
        yield Store(db)
    finally:
        await db.close()


async def _add_pair(store: Store, n: int) -> None:
    async with store.db.transaction() as c:
        await c.execute(ADD_SCHEDULE, f"{n}-a")
        await c.execute(ADD_SCHEDULE, f"{n}-b")


async def _stored(store: Store, n: int) -> set[str]:
    return {row["name"] for row in await store.schedules([f"{n}-a", f"{n}-b"])}


async def test_a_transaction_cancelled_at_any_step_commits_whole_or_not_at_all(store: Store) -> None:
    for steps in range(14):  # cancel after 0, 1, 2 ... turns of the loop: before, during, after BEGIN
        adding = asyncio.ensure_future(_add_pair(store, steps))
        for _ in range(steps):
            await asyncio.sleep(0)  # picks the point the cancellation lands at
        adding.cancel()
        [outcome] = await asyncio.gather(adding, return_exceptions=True)
        stored = await _stored(store, steps)
        assert stored in (set(), {f"{steps}-a", f"{steps}-b"}), f"cancelled after {steps} turns: half of it"
        if not isinstance(outcome, asyncio.CancelledError):
            assert stored, f"finished after {steps} turns, yet nothing is stored"
        if steps < 2:  # cancelled before or while BEGIN was waited for
            assert isinstance(outcome, asyncio.CancelledError) and not stored
        # A cancel that lands while COMMIT is on its way may leave it committed: the caller cannot
        # tell, as with any database. What must never happen is a connection left in a transaction.
        await _add_pair(store, 100 + steps)
        assert await _stored(store, 100 + steps) == {f"{100 + steps}-a", f"{100 + steps}-b"}
