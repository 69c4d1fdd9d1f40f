"""The run manager through its public interface (``RunManager`` with in-process stand-ins for its
database and checkpoint store, from ``runs_kit``): a forced cancellation whose checkpoint cannot be
saved yet is saved once the store answers again; a background task that fails is logged with its
traceback, never lost; runs left in flight are resumed, or ended or caught up when they cannot be;
a run running in another "process" is followed and cancelled from here; a lost lease stops a run;
keeping leases outlives an outage; finished runs are deleted after their retention."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from core.agents import Agent, ReActCognition
from core.contracts.ports import CheckpointStatus
from core.contracts.types import ToolCall, ToolSchema
from core.errors import ConflictError, NotFoundError
from core.runs.catalog import AgentCatalog
from core.runs.manager import RunManager
from core.state.stores import CheckpointVersionConflict
from core.testing import FakeLLM, Turn
from tests.core.runs.runs_kit import Checkpoints, CheckpointsDown, Gate, Index, run_manager
from tests.kit import until


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
    manager = run_manager(catalog, checkpoints, Index())
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


# -- a second "process", runs that end, runs left in flight --------------------------------------------


class Step:
    """A tool that returns at once, after doing ``then`` (a test's way to act mid-run)."""

    name = "step"
    side_effecting = False
    schema = ToolSchema("step", "Take a step", {"type": "object"})

    def __init__(self, then: Callable[[], None] = lambda: None) -> None:
        self.then = then

    async def run(self, args: Any, ctx: Any) -> str:
        self.then()
        return "stepped"


def declare_quick(catalog: AgentCatalog, name: str = "quick") -> None:
    """An agent that answers at once, with no tool."""
    catalog.declare(Agent(name, "fake"), llm=FakeLLM.script([Turn("done")], repeat_last=True))


def declare_stuck(catalog: AgentCatalog, gate: Gate) -> None:
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "wait_for_gate", {})]), Turn("never asked for")])
    catalog.declare(Agent("ops", "fake", ReActCognition([gate])), llm=llm)


@pytest.fixture
def index() -> Index:
    return Index()


@pytest.fixture
async def managers(checkpoints: Checkpoints, index: Index) -> AsyncIterator[Callable[..., RunManager]]:
    """Makes "processes" sharing the checkpoints and the index; closes them all at the end."""
    made: list[RunManager] = []

    def make(catalog: AgentCatalog | None = None, **settings: Any) -> RunManager:
        manager = run_manager(catalog or AgentCatalog(), checkpoints, index, **settings)
        made.append(manager)
        return manager

    try:
        yield make
    finally:
        for manager in made:
            await manager.close()


async def ended(manager: RunManager, run_id: str) -> None:
    async def done() -> bool:
        return (await manager.record_of(run_id)).terminal and run_id not in manager.live

    await until(done, f"run {run_id} ends")


async def left_in_flight(make: Callable[..., RunManager], gate: Gate) -> str:
    """A run whose process stopped inside a tool call: ``running`` in its last checkpoint."""
    catalog = AgentCatalog()
    declare_stuck(catalog, gate)
    previous = make(catalog, tool_grace=0)  # it does not wait for the call at shutdown
    run_id = await stuck_run(previous, gate)
    await previous.close()
    return run_id


async def test_a_run_whose_state_cannot_be_saved_stops_and_gives_its_lease_up(
    managers: Callable[..., RunManager],
    checkpoints: Checkpoints,
    index: Index,
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = AgentCatalog()

    def database_down() -> None:
        checkpoints.failure = RuntimeError("the checkpoints' disk is full")

    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "step", {})]), Turn("done")])
    catalog.declare(Agent("ops", "fake", ReActCognition([Step(database_down)])), llm=llm)
    manager = managers(catalog)
    record = await manager.start("ops", "go", max_cost_usd=None, max_calls=None)
    await until(lambda: record.run_id not in manager.live, "the run stops")
    latest = await checkpoints.latest(record.run_id)
    assert latest is not None and latest.status is CheckpointStatus.RUNNING
    assert latest.state["pending"]["key"].endswith(":c1")  # as it stood before the tool call
    assert index.released == [record.run_id] and index.status[record.run_id] == "running"
    assert any("could not be saved" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_a_run_left_in_flight_is_resumed_and_finished_by_the_next_process(
    managers: Callable[..., RunManager], index: Index, gate: Gate
) -> None:
    run_id = await left_in_flight(managers, gate)
    catalog = AgentCatalog()
    llm = FakeLLM.script([Turn("finished after the restart")])
    catalog.declare(Agent("ops", "fake", ReActCognition([Step()])), llm=llm)
    index.orphans.append((run_id, "ops", "host:4242:dead"))  # its process was killed on this host
    manager = managers(catalog)
    assert await manager.resume_in_flight() == 1
    await ended(manager, run_id)
    record = await manager.record_of(run_id)
    assert (record.status, record.output) == (CheckpointStatus.COMPLETED, "finished after the restart")
    assert record.epoch == 1 and index.status[run_id] == "completed" and index.orphans == []


async def test_runs_that_cannot_be_resumed_are_ended_or_caught_up_in_the_index(
    managers: Callable[..., RunManager], checkpoints: Checkpoints, index: Index, gate: Gate
) -> None:
    unknown_agent = await left_in_flight(managers, gate)
    quick = AgentCatalog()
    declare_quick(quick)
    first = managers(quick)
    finished = (await first.start("quick", "hi", max_cost_usd=None, max_calls=None)).run_id
    await ended(first, finished)
    index.status[finished] = "running"  # the process died before it could say so
    index.waiting += [("ghost", "quick"), (finished, "quick"), (unknown_agent, "ops")]
    index.status["ghost"] = "running"  # indexed, but its first checkpoint was never saved

    manager = managers(quick, resume_wait=0.01)
    assert await manager.resume_in_flight() == 0
    assert index.status == {unknown_agent: "failed", finished: "completed", "ghost": "failed"}
    record = await manager.record_of(unknown_agent)
    assert record.status is CheckpointStatus.FAILED and record.error is not None
    assert "'ops' is not declared in this service" in record.error
    assert [e["kind"] for e in record.events][-1] == "final"


async def test_a_run_claimed_while_the_service_stops_is_released_not_started(
    managers: Callable[..., RunManager], index: Index, gate: Gate
) -> None:
    run_id = await left_in_flight(managers, gate)
    index.waiting.append((run_id, "ops"))
    catalog = AgentCatalog()
    manager = managers(catalog, resume_wait=30)
    resuming = asyncio.create_task(manager.resume_in_flight())
    await until(lambda: not index.waiting, "the run is claimed; its agent is awaited")
    await manager.close()
    declare_stuck(catalog, gate)  # the plugin declares its agent just as the service stops
    assert await resuming == 0
    assert run_id not in manager.live and index.released[-1] == run_id


async def test_a_run_running_in_another_process_is_followed_and_cancelled_from_here(
    managers: Callable[..., RunManager], gate: Gate
) -> None:
    catalog = AgentCatalog()
    declare_stuck(catalog, gate)
    elsewhere = managers(catalog, tool_grace=0)
    run_id = await stuck_run(elsewhere, gate)
    await until(lambda: elsewhere.live[run_id].record.version == 2, "the tool call is checkpointed")
    here = managers(AgentCatalog())
    kinds: list[str] = []

    async def follow() -> None:
        async for item in await here.follow(run_id, None):
            kinds.append(item["event"])

    follower = asyncio.create_task(follow())
    await until(lambda: "tool_call" in kinds, "the follower reads the other process's checkpoint")
    assert await here.cancel(run_id) == {"id": run_id, "status": "cancelled"}
    async with asyncio.timeout(10):
        await follower
    assert kinds[-1] == "final" and kinds.count("final") == 1
    record = await here.record_of(run_id)
    assert (record.status, record.error) == (CheckpointStatus.CANCELLED, "cancelled through the API")
    with pytest.raises(ConflictError, match="has already ended"):
        await here.cancel(run_id)


async def test_a_cancellation_that_keeps_losing_the_race_is_a_conflict(
    managers: Callable[..., RunManager], checkpoints: Checkpoints, gate: Gate
) -> None:
    run_id = await left_in_flight(managers, gate)
    checkpoints.failure = CheckpointVersionConflict("another process saved first")
    with pytest.raises(ConflictError, match="keeps changing"):
        await managers().cancel(run_id)


async def test_a_forced_cancellation_that_lost_the_run_gives_up(
    manager: RunManager, checkpoints: Checkpoints, gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = await stuck_run(manager, gate)
    checkpoints.failure = CheckpointVersionConflict("another process took the run over")
    await manager.cancel(run_id)
    await until(lambda: run_id not in manager.live, "the run's task is stopped")
    assert any("moved on elsewhere while it was being cancelled" in r.getMessage() for r in caplog.records)
    latest = await checkpoints.latest(run_id)
    assert latest is not None and latest.status is CheckpointStatus.RUNNING


async def test_a_run_whose_lease_another_process_took_is_stopped_here(
    managers: Callable[..., RunManager], checkpoints: Checkpoints, index: Index, gate: Gate
) -> None:
    catalog = AgentCatalog()
    declare_stuck(catalog, gate)
    manager = managers(catalog, lease=0.15)
    run_id = await stuck_run(manager, gate)
    manager.start_resuming()
    index.taken.add(run_id)
    await until(lambda: run_id not in manager.live, "the run is stopped here")
    latest = await checkpoints.latest(run_id)
    assert latest is not None and latest.status is CheckpointStatus.RUNNING  # left to its new holder


async def test_keeping_leases_takes_over_orphans_and_outlives_a_database_outage(
    managers: Callable[..., RunManager], index: Index, gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "keel.agents")
    run_id = await left_in_flight(managers, gate)
    catalog = AgentCatalog()
    catalog.declare(Agent("ops", "fake", ReActCognition([Step()])), llm=FakeLLM.script([Turn("taken over")]))
    index.failures["claimable"] = ConnectionError("the database is restarting")
    manager = managers(catalog, lease=0.15)
    manager.start_resuming()
    await until(
        lambda: any("keeping leases failed" in r.getMessage() for r in caplog.records), "the outage is logged"
    )
    assert any("resuming the runs in flight failed" in r.getMessage() for r in caplog.records)
    index.waiting.append((run_id, "ops"))  # its lease expired
    del index.failures["claimable"]
    await ended(manager, run_id)
    assert (await manager.record_of(run_id)).output == "taken over"
    messages = [r.getMessage() for r in caplog.records]
    assert "agents: keeping leases works again" in messages
    assert "agents: took over 1 run(s) whose process stopped renewing its lease" in messages


async def test_finished_runs_are_deleted_after_their_retention_only(
    managers: Callable[..., RunManager], checkpoints: Checkpoints, index: Index
) -> None:
    catalog = AgentCatalog()
    declare_quick(catalog)
    forever = managers(catalog, retention=0)
    run_id = (await forever.start("quick", "hi", max_cost_usd=None, max_calls=None)).run_id
    await ended(forever, run_id)
    assert await forever.purge_finished() == 0
    index.updated[run_id] -= 3600  # it ended an hour ago
    assert await managers(catalog, retention=3000).purge_finished() == 1
    assert await checkpoints.latest(run_id) is None and run_id not in index.status
    with pytest.raises(NotFoundError):
        await forever.view(run_id)


async def test_a_run_index_that_fails_to_record_a_status_only_logs_it(
    managers: Callable[..., RunManager], index: Index, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = AgentCatalog()
    declare_quick(catalog)
    manager = managers(catalog)
    index.failures["set_status"] = ConnectionError("the database is restarting")
    run_id = (await manager.start("quick", "hi", max_cost_usd=None, max_calls=None)).run_id
    await ended(manager, run_id)
    assert (await manager.record_of(run_id)).status is CheckpointStatus.COMPLETED
    assert index.status[run_id] == "running"  # caught up by the next process that looks
    assert any("updating the run index failed" in r.getMessage() for r in caplog.records)
