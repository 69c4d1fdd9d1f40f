"""Triggered agent runs: one durable run per published event (de-duplicated by event id, across
"processes" sharing the scheduler's database and the run store), one per schedule tick, each with
the trigger's budget; a trigger job that runs again starts no second run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.agents import Agent, ReActCognition
from core.runs.catalog import AgentCatalog
from core.runs.manager import RunManager
from core.runs.triggers import publish_manager, run_id_for, triggers_for
from core.state.stores import InMemoryCheckpointStore
from core.testing import FakeLLM, Turn
from domains.agents.plugins.agent_triggers import JOB, AgentTriggersPlugin
from tests.conftest import DATABASE_ENGINES, database_url
from tests.core.runs.runs_kit import Index, run_manager
from tests.kit import bound_tool, until
from tools.event_bus.event_bus_tool import EventBusTool
from tools.scheduler.scheduler_tool import SchedulerTool


class Container:
    """Stands in for a kernel's container (the key of its catalog, triggers and run manager)."""


class Process:
    """One "process": its scheduler, event bus, run manager and triggers plugin."""

    def __init__(self, scheduler: SchedulerTool, bus: EventBusTool, manager: RunManager) -> None:
        self.container = Container()
        self.scheduler = scheduler
        self.bus = bus
        self.manager = manager
        publish_manager(self.container, manager)
        self.book = triggers_for(self.container)
        self.plugin = AgentTriggersPlugin(self.container, scheduler, bus)


@pytest.fixture(params=DATABASE_ENGINES)
async def processes(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[list[Process], InMemoryCheckpointStore, Index]]:
    checkpoints, index = InMemoryCheckpointStore(), Index()
    async with database_url(request.param, "data/scheduler.db") as url:
        monkeypatch.setenv("SCHEDULER_URL", url)
        monkeypatch.delenv("EVENT_BUS_URL", raising=False)
        made: list[Process] = []
        for _ in range(2):
            scheduler = bound_tool(SchedulerTool, tmp_path)
            await scheduler.setup()
            bus = EventBusTool()
            await bus.setup()
            catalog = AgentCatalog()
            llm = FakeLLM.script([Turn("triaged")], repeat_last=True)
            catalog.declare(Agent("triage", "fake", ReActCognition([])), llm=llm)
            manager = run_manager(catalog, checkpoints, index)
            made.append(Process(scheduler, bus, manager))
        try:
            yield made, checkpoints, index
        finally:
            for process in made:
                await process.plugin.on_shutdown()
                await process.manager.close()
                await process.scheduler.shutdown()
                await process.bus.shutdown()


async def test_one_run_per_event_across_processes_with_the_triggers_budget(
    processes: tuple[list[Process], InMemoryCheckpointStore, Index],
) -> None:
    both, checkpoints, index = processes
    delivered: list[Any] = []
    for process in both:
        process.book.on_event(
            "triage", "ticket.created", input="Triage ticket {payload[id]}: {payload[title]}", max_calls=3
        )
        await process.plugin.on_boot()
    first, second = both
    await first.bus.subscribe("ticket.created", delivered.append, group="spy")
    await first.bus.publish("ticket.created", {"id": 7, "title": "printer on fire"})
    await until(lambda: len(delivered) == 1, "the event is delivered")
    event = delivered[0]
    # A shared bus may hand the same event to the other process too (a redelivery after a crash):
    await second.plugin._event_handler("triage:ticket.created")(event)
    await until(lambda: _jobs(first.scheduler), "the event became a scheduler job")
    await asyncio.gather(first.scheduler.tick(), second.scheduler.tick())
    await asyncio.gather(first.scheduler.tick(), second.scheduler.tick())

    run_id = run_id_for(f"{JOB}:triage:ticket.created:{event.id}")
    assert list(index.status) == [run_id]
    record = await first.manager.record_of(run_id)
    assert record.input == "Triage ticket 7: printer on fire" and record.max_calls == 3
    await until(lambda: _ended(checkpoints, run_id), "the triggered run ends like any run")
    jobs = await first.scheduler.jobs(name=JOB)
    assert [(j["status"], j["payload"]["event_id"]) for j in jobs] == [("done", event.id)]

    await first.bus.publish("ticket.created", {"id": 8, "title": "no coffee"})
    await until(lambda: len(delivered) == 2, "the second event is delivered")
    await until(lambda: _count(first.scheduler, 2), "the second event became a job")
    await first.scheduler.tick()
    assert len(index.status) == 2


async def test_a_trigger_job_that_runs_again_starts_no_second_run(
    processes: tuple[list[Process], InMemoryCheckpointStore, Index],
) -> None:
    [process, _], _, index = processes
    process.book.on_event("triage", "ticket.created", input="{payload}")
    await process.plugin.on_boot()
    await process.bus.publish("ticket.created", {"id": 1})
    await until(lambda: _jobs(process.scheduler), "the event became a scheduler job")
    await process.scheduler.tick()
    [job] = await process.scheduler.jobs(name=JOB)
    assert await process.scheduler.rerun(job["id"])  # as if its process died after starting the run
    assert await process.scheduler.tick() == 1
    assert len(index.status) == 1


async def test_a_schedule_trigger_starts_one_run_per_tick(
    processes: tuple[list[Process], InMemoryCheckpointStore, Index],
) -> None:
    both, _, index = processes
    now = [1_800_000_000.0]
    for process in both:
        process.scheduler.clock = lambda: now[0]
        process.book.on_schedule("triage", every=60, input="digest due {due_at:.0f}", max_cost_usd="0.01")
        await process.plugin.on_boot()
    await asyncio.gather(*(p.scheduler.tick() for p in both))
    for _ in range(3):
        now[0] += 60
        await asyncio.gather(*(p.scheduler.tick() for p in both))
    assert len(index.status) == 3
    records = [await both[0].manager.record_of(run_id) for run_id in index.status]
    assert sorted(r.input for r in records) == [f"digest due {1_800_000_000 + 60 * k}" for k in (1, 2, 3)]
    assert {r.max_cost_usd for r in records} == {"0.01"}


async def test_a_withdrawn_trigger_starts_nothing(
    processes: tuple[list[Process], InMemoryCheckpointStore, Index],
) -> None:
    [process, _], _, index = processes
    process.book.on_event("triage", "ticket.created", input="{payload}")
    await process.plugin.on_boot()
    process.book.withdraw_owner(None)
    await process.bus.publish("ticket.created", {"id": 1})
    await process.bus.publish("other.event", {})
    await process.scheduler.tick()
    assert index.status == {} and await process.scheduler.jobs(name=JOB) == []


async def _jobs(scheduler: SchedulerTool) -> bool:
    return bool(await scheduler.jobs(name=JOB))


async def _count(scheduler: SchedulerTool, count: int) -> bool:
    return len(await scheduler.jobs(name=JOB)) >= count


async def _ended(checkpoints: InMemoryCheckpointStore, run_id: str) -> bool:
    latest = await checkpoints.latest(run_id)
    return latest is not None and str(latest.status) != "running"
