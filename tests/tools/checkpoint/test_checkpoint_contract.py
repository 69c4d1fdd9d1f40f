"""The CheckpointPort contract, run against every backend: the reference InMemoryCheckpointStore and
the ``checkpoint`` tool on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.contracts.ports import Checkpoint, CheckpointPort, CheckpointStatus
from core.state.stores import CheckpointVersionConflict

STATE = {"turn": 3, "messages": [{"role": "user", "content": "hi"}], "usage": {"cost": 0.25}, "done": False}


def checkpoint(
    run_id: str, version: int, state: Any = None, status: CheckpointStatus = CheckpointStatus.RUNNING
) -> Checkpoint:
    return Checkpoint(run_id, version, STATE if state is None else state, 1_700_000_000.5 + version, status)


async def test_it_is_a_checkpoint_port(checkpoints: Any) -> None:
    assert isinstance(checkpoints, CheckpointPort)


async def test_an_unknown_run_has_nothing(checkpoints: Any) -> None:
    assert await checkpoints.latest("nope") is None
    assert await checkpoints.at_version("nope", 1) is None
    assert await checkpoints.list_versions("nope") == []


async def test_versions_are_kept_and_read_back_whole(checkpoints: Any) -> None:
    for version in (1, 2, 3):
        await checkpoints.save(checkpoint("r", version, {"turn": version, "nested": {"list": [version]}}))
    latest = await checkpoints.latest("r")
    assert latest == checkpoint("r", 3, {"turn": 3, "nested": {"list": [3]}})
    assert await checkpoints.at_version("r", 2) == checkpoint("r", 2, {"turn": 2, "nested": {"list": [2]}})
    assert await checkpoints.at_version("r", 9) is None
    assert await checkpoints.list_versions("r") == [1, 2, 3]


async def test_a_read_checkpoint_is_frozen(checkpoints: Any) -> None:
    await checkpoints.save(checkpoint("r", 1))
    latest = await checkpoints.latest("r")
    assert latest is not None and latest.state == STATE
    with pytest.raises(TypeError):
        latest.state["turn"] = 99


@pytest.mark.parametrize("status", list(CheckpointStatus))
async def test_every_status_round_trips(checkpoints: Any, status: CheckpointStatus) -> None:
    await checkpoints.save(checkpoint("r", 1, status=status))
    latest = await checkpoints.latest("r")
    assert latest is not None and latest.status is status


async def test_versions_start_at_one(checkpoints: Any) -> None:
    for version in (0, -1):
        with pytest.raises(CheckpointVersionConflict, match="versions start at 1"):
            await checkpoints.save(checkpoint("r", version))
    assert await checkpoints.list_versions("r") == []


async def test_a_version_not_above_the_latest_is_a_conflict_and_changes_nothing(checkpoints: Any) -> None:
    await checkpoints.save(checkpoint("r", 1, {"v": 1}))
    await checkpoints.save(checkpoint("r", 2, {"v": 2}))
    for stale in (2, 1):
        with pytest.raises(CheckpointVersionConflict, match="is not above the latest saved version 2"):
            await checkpoints.save(checkpoint("r", stale, {"v": "stale"}))
    assert await checkpoints.list_versions("r") == [1, 2]
    assert (await checkpoints.latest("r")) == checkpoint("r", 2, {"v": 2})


async def test_versions_may_skip_but_never_go_back(checkpoints: Any) -> None:
    await checkpoints.save(checkpoint("r", 1))
    await checkpoints.save(checkpoint("r", 5))
    with pytest.raises(CheckpointVersionConflict):
        await checkpoints.save(checkpoint("r", 4))
    assert await checkpoints.list_versions("r") == [1, 5]


async def test_runs_are_independent(checkpoints: Any) -> None:
    await checkpoints.save(checkpoint("a", 1, {"run": "a"}))
    await checkpoints.save(checkpoint("b", 1, {"run": "b"}))
    await checkpoints.save(checkpoint("b", 2, {"run": "b"}))
    assert await checkpoints.list_versions("a") == [1]
    assert (await checkpoints.latest("a")) == checkpoint("a", 1, {"run": "a"})


async def test_delete_forgets_every_version_and_the_run_may_start_again(checkpoints: Any) -> None:
    await checkpoints.save(checkpoint("r", 1))
    await checkpoints.save(checkpoint("r", 2))
    await checkpoints.save(checkpoint("other", 1))
    await checkpoints.delete("r")
    await checkpoints.delete("r")  # idempotent
    assert await checkpoints.latest("r") is None and await checkpoints.list_versions("r") == []
    assert await checkpoints.list_versions("other") == [1]
    await checkpoints.save(checkpoint("r", 1, {"fresh": True}))
    assert (await checkpoints.latest("r")) == checkpoint("r", 1, {"fresh": True})


async def test_two_producers_on_one_run_never_fork_it(checkpoints: Any) -> None:
    await checkpoints.save(checkpoint("r", 1, {"by": "start"}))
    base = await checkpoints.latest("r")
    assert base is not None
    # Both producers read version 1 and save "latest + 1": exactly one of them may win.
    outcomes = await asyncio.gather(
        checkpoints.save(checkpoint("r", base.version + 1, {"by": "A"})),
        checkpoints.save(checkpoint("r", base.version + 1, {"by": "B"})),
        return_exceptions=True,
    )
    conflicts = [o for o in outcomes if isinstance(o, CheckpointVersionConflict)]
    assert len(conflicts) == 1 and outcomes.count(None) == 1
    winner = "A" if outcomes[0] is None else "B"
    assert (await checkpoints.latest("r")) == checkpoint("r", 2, {"by": winner})
    assert await checkpoints.list_versions("r") == [1, 2]


async def test_many_concurrent_producers_leave_strictly_increasing_versions(checkpoints: Any) -> None:
    async def producer(name: str) -> int:
        saved = 0
        for _ in range(5):
            latest = await checkpoints.latest("busy")
            version = 1 if latest is None else latest.version + 1
            try:
                await checkpoints.save(checkpoint("busy", version, {"by": name}))
            except CheckpointVersionConflict:
                continue
            saved += 1
        return saved

    saved = await asyncio.gather(*(producer(f"p{n}") for n in range(4)))
    versions = await checkpoints.list_versions("busy")
    assert versions == list(range(1, len(versions) + 1))
    assert sum(saved) == len(versions)
