"""The run manager's background work (``RunManager`` with in-process stand-ins for its database and
checkpoint store): a forced cancellation whose checkpoint cannot be saved yet is saved once the store
answers again, and a background task that fails is logged with its traceback, never lost."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from core.agents import Agent, ReActCognition
from core.contracts.ports import Checkpoint, CheckpointStatus
from core.contracts.types import ToolCall, ToolSchema
from core.errors import ToolUnavailableError
from core.runs.catalog import AgentCatalog
from core.runs.execution import RunServices
from core.runs.manager import RunManager, RunSettings
from core.runtime import NoopTrace
from core.state.stores import InMemoryCheckpointStore
from core.testing import FakeLLM, Turn
from tests.kit import until


class CheckpointsDown(ToolUnavailableError):
    """What the checkpoint tool raises while its database cannot be reached."""


class Checkpoints(InMemoryCheckpointStore):
    """In-memory checkpoints whose saves can be made to fail (``failure``), and back (``None``)."""

    def __init__(self) -> None:
        super().__init__()
        self.failure: Exception | None = None

    async def save(self, checkpoint: Checkpoint) -> None:
        if self.failure is not None:
            raise self.failure
        await super().save(checkpoint)


class Index:
    """The ``agent_runs`` table, for one process that holds every lease."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {}

    async def add(self, run_id: str, agent: str, created_at: float, **owner: str | None) -> None:
        self.status[run_id] = "running"

    async def set_status(self, run_id: str, status: str) -> None:
        self.status[run_id] = status

    async def remove(self, run_id: str) -> None:
        self.status.pop(run_id, None)

    async def claimable(self) -> list[tuple[str, str]]:
        return []

    async def claim(self, run_id: str) -> bool:
        return False

    async def renew(self, run_ids: Iterable[str]) -> set[str]:
        return set(run_ids)

    async def release(self, run_ids: Iterable[str] | None = None) -> None:
        return None


class Gate:
    """A tool that never returns (until the run's task is cancelled)."""

    name = "wait_for_gate"
    side_effecting = False
    schema = ToolSchema("wait_for_gate", "Wait until the gate opens", {"type": "object"})

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def run(self, args: Any, ctx: Any) -> str:
        self.entered.set()
        await asyncio.Event().wait()
        return "never"


@pytest.fixture
def checkpoints() -> Checkpoints:
    return Checkpoints()


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def manager(checkpoints: Checkpoints, gate: Gate) -> AsyncIterator[RunManager]:
    catalog = AgentCatalog()
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "wait_for_gate", {})]), Turn("never asked for")])
    catalog.declare(Agent("ops", "fake", ReActCognition([gate])), llm=llm)
    manager = RunManager(
        catalog=catalog,
        index=Index(),  # type: ignore[arg-type]
        services=RunServices(checkpoint=checkpoints, store=None, trace=NoopTrace()),
        settings=RunSettings(cancel_grace=0.05, poll=0.05),
    )
    try:
        yield manager
    finally:
        await manager.close()


async def stuck_run(manager: RunManager, gate: Gate) -> str:
    record = await manager.start("ops", "wait", max_cost_usd=None, max_calls=None)
    async with asyncio.timeout(10):
        await gate.entered.wait()
    return record.run_id


async def test_a_forced_cancellation_is_saved_once_the_checkpoint_store_answers_again(
    manager: RunManager, checkpoints: Checkpoints, gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = await stuck_run(manager, gate)
    checkpoints.failure = CheckpointsDown("the checkpoints' PostgreSQL is unreachable")
    assert await manager.cancel(run_id) == {"id": run_id, "status": "cancelling"}
    await until(
        lambda: any(
            r.name == "keel.agents" and r.exc_info and "could not be saved" in r.getMessage()
            for r in caplog.records
        ),
        "the failed save is logged with its traceback",
    )
    assert (await manager.record_of(run_id)).status is CheckpointStatus.RUNNING
    checkpoints.failure = None

    async def cancelled() -> bool:
        latest = await checkpoints.latest(run_id)
        return latest is not None and latest.status is CheckpointStatus.CANCELLED

    await until(cancelled, "the cancelled checkpoint is saved")
    record = await manager.record_of(run_id)
    assert (record.status, record.error) == (CheckpointStatus.CANCELLED, "cancelled through the API (forced)")
    assert [e["kind"] for e in record.events].count("final") == 1
    assert run_id not in manager.live


async def test_a_background_task_that_fails_is_logged_with_its_traceback(
    manager: RunManager, checkpoints: Checkpoints, gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = await stuck_run(manager, gate)
    checkpoints.failure = RuntimeError("the disk is full")
    await manager.cancel(run_id)

    def failures() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "keel.agents" and r.exc_info and isinstance(r.exc_info[1], RuntimeError)
        ]

    await until(lambda: bool(failures()), "the failure is logged")
    (record,) = failures()
    assert record.levelno == logging.ERROR and "failed" in record.getMessage()
    assert run_id not in manager.live
