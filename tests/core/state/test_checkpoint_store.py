"""InMemoryCheckpointStore: every version kept, versions strictly increasing per run."""

from __future__ import annotations

import pytest

from core.contracts.errors import KeelError
from core.contracts.ports import Checkpoint, CheckpointPort, CheckpointStatus
from core.state.stores import CheckpointVersionConflict, InMemoryCheckpointStore


def cp(run_id: str, version: int, turn: int = 0) -> Checkpoint:
    return Checkpoint(run_id, version, {"turn": turn}, 1.0, CheckpointStatus.RUNNING)


def test_satisfies_the_port() -> None:
    assert isinstance(InMemoryCheckpointStore(), CheckpointPort)


async def test_save_latest_at_version_and_list() -> None:
    store = InMemoryCheckpointStore()
    assert await store.latest("r") is None and await store.list_versions("r") == []
    await store.save(cp("r", 1, turn=1))
    await store.save(cp("r", 2, turn=2))
    await store.save(cp("r", 5, turn=5))  # gaps are allowed; going back is not
    latest = await store.latest("r")
    assert latest is not None and latest.version == 5 and latest.state == {"turn": 5}
    assert (await store.at_version("r", 2)) == cp("r", 2, turn=2)
    assert await store.at_version("r", 3) is None
    assert await store.list_versions("r") == [1, 2, 5]


async def test_versions_strictly_increase_per_run() -> None:
    store = InMemoryCheckpointStore()
    await store.save(cp("r", 2))
    for version in (1, 2):
        with pytest.raises(CheckpointVersionConflict, match="not above the latest") as info:
            await store.save(cp("r", version))
        assert isinstance(info.value, KeelError)
    with pytest.raises(CheckpointVersionConflict, match="start at 1"):
        await store.save(cp("other", 0))
    await store.save(cp("other", 1))  # runs are independent
    assert await store.list_versions("r") == [2]


async def test_delete_removes_every_version_and_is_idempotent() -> None:
    store = InMemoryCheckpointStore()
    await store.save(cp("r", 1))
    await store.save(cp("r", 2))
    await store.delete("r")
    await store.delete("r")
    assert await store.latest("r") is None and await store.list_versions("r") == []
    await store.save(cp("r", 1))  # a deleted run starts over
