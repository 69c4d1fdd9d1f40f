"""The scheduler's store: a transaction cancelled at any point either committed whole or left
nothing behind, and the next one runs (a lease renewal is cancelled the moment its job finishes, at
whatever point of its transaction it stands)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tools.scheduler.scheduler_tool import make_database
from tools.scheduler.store import Store


@pytest.fixture
async def store(scheduler_url: str, tmp_path: Path) -> AsyncIterator[Store]:
    db = make_database(scheduler_url, tmp_path)
    await db.open()
    try:
        yield Store(db)
    finally:
        await db.close()


def _job(n: int) -> dict[str, Any]:
    return {
        "id": f"job-{n}",
        "key": f"key-{n}",
        "name": "work",
        "payload": "null",
        "due_at": 0.0,
        "max_attempts": 1,
        "created_at": 0.0,
    }


async def test_a_transaction_cancelled_at_any_step_commits_whole_or_not_at_all(store: Store) -> None:
    outcomes: dict[int, bool] = {}
    for steps in range(12):  # cancel after 0, 1, 2 ... turns of the loop: before, during, after BEGIN
        adding = asyncio.ensure_future(store.add_job(_job(steps)))
        for _ in range(steps):
            await asyncio.sleep(0)  # picks the point the cancellation lands at
        adding.cancel()
        finished = await asyncio.gather(adding, return_exceptions=True)
        outcomes[steps] = not isinstance(finished[0], asyncio.CancelledError)
        # the next transaction runs on a clean connection, whatever the cancelled one left
        assert await store.add_job(_job(100 + steps)) == (f"job-{100 + steps}", True)
        stored = await store.job(f"job-{steps}")
        assert (stored is not None) == outcomes[steps], f"cancelled after {steps} turns"
    assert not outcomes[0] and not outcomes[1]  # cancelled before or while BEGIN was waited for
