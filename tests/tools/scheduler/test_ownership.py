"""Schedules and job handlers belong to the plugin that registered them, like routes."""

from __future__ import annotations

from typing import Any

from core.context import current_plugin_var
from core.reloader import staging_owner
from tests.tools.scheduler.conftest import FakeClock, Start


def as_plugin(owner: str, register: Any) -> Any:
    token = current_plugin_var.set(owner)
    try:
        return register()
    finally:
        current_plugin_var.reset(token)


async def test_unloading_a_plugin_stops_its_schedules_and_handlers(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    ran: list[str] = []

    def sweep(job: dict[str, Any]) -> None:
        ran.append(job["name"])

    name = as_plugin("ops.Cleanup", lambda: tool.every(10, sweep))
    as_plugin("ops.Cleanup", lambda: tool.on_job("purge", sweep))
    as_plugin("ops.Other", lambda: tool.every(10, sweep, name="other"))
    assert name == "ops.Cleanup.sweep"
    [mine, other] = sorted(await tool.schedules(), key=lambda r: r["name"])
    assert (mine["plugin"], other["plugin"]) == ("ops.Cleanup", "ops.Other")

    tool.release_owner("ops.Cleanup")
    await tool.after(0, "purge")
    clock.advance(10)
    assert await tool.tick() == 1
    assert ran == ["schedule:other"]
    assert [r["name"] for r in await tool.schedules()] == ["other"]


async def test_a_reload_swaps_the_new_versions_schedules_in_at_promotion(
    start: Start, clock: FakeClock
) -> None:
    tool = await start(clock)
    ran: list[str] = []
    as_plugin("ops.Cleanup", lambda: tool.every(10, lambda job: ran.append("v1"), name="sweep"))
    await tool.tick()
    staged = staging_owner("ops.Cleanup", 1)
    as_plugin(staged, lambda: tool.every(10, lambda job: ran.append("v2"), name="sweep"))
    clock.advance(10)
    await tool.tick()
    assert ran == ["v1"]  # the new version is not live before it is promoted
    tool.promote_owner(staged, "ops.Cleanup")
    clock.advance(10)
    await tool.tick()
    assert ran == ["v1", "v2"]
    [row] = await tool.schedules()
    assert row["plugin"] == "ops.Cleanup" and row["next_fire"] == clock.now + 10  # the phase is kept


async def test_a_failed_reload_leaves_the_old_version_firing(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    ran: list[str] = []
    as_plugin("ops.Cleanup", lambda: tool.every(10, lambda job: ran.append("v1"), name="sweep"))
    staged = staging_owner("ops.Cleanup", 2)
    as_plugin(staged, lambda: tool.every(10, lambda job: ran.append("v2"), name="sweep"))
    tool.release_owner(staged)  # the new version failed to boot
    await tool.tick()
    clock.advance(10)
    await tool.tick()
    assert ran == ["v1"]
