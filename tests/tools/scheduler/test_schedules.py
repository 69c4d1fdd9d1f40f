"""Schedules and one-shot jobs on SQLite and PostgreSQL, driven by a fake clock (``tick()`` is one pass)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.tools.scheduler.conftest import FakeClock, Start


def recorder() -> tuple[list[dict[str, Any]], Any]:
    seen: list[dict[str, Any]] = []

    async def handler(job: dict[str, Any]) -> None:
        seen.append(job)

    return seen, handler


async def test_every_fires_once_per_interval_and_keeps_its_phase(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    seen, handler = recorder()
    name = tool.every(10, handler, name="sweep")
    assert name == "sweep"
    assert await tool.tick() == 0  # the first tick is one interval away
    clock.advance(9.9)
    assert await tool.tick() == 0
    clock.advance(0.2)
    assert await tool.tick() == 1
    assert await tool.tick() == 0  # the same tick is not fired twice
    assert seen[0]["schedule"] == "sweep" and seen[0]["due_at"] == pytest.approx(clock.now - 0.1)
    clock.advance(10)
    assert await tool.tick() == 1
    [row] = await tool.schedules()
    assert row["next_fire"] == pytest.approx(seen[0]["due_at"] + 20)
    assert row["last_status"] == "done" and row["last_fire"] == pytest.approx(seen[1]["due_at"])


async def test_missed_ticks_collapse_into_one_run_under_catch_up_once(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    seen, handler = recorder()
    tool.every(10, handler, name="sweep")
    await tool.tick()
    clock.advance(95)  # nine ticks came due
    assert await tool.tick() == 1
    assert await tool.tick() == 0
    [row] = await tool.schedules()
    assert row["next_fire"] == pytest.approx(clock.now - 95 + 100)  # still on its phase
    assert len(seen) == 1


async def test_cron_follows_its_time_zone(start: Start) -> None:
    paris = ZoneInfo("Europe/Paris")
    clock = FakeClock(datetime(2027, 3, 27, 2, 59, tzinfo=paris).timestamp())
    tool = await start(clock)
    seen, handler = recorder()
    tool.cron("0 3 * * *", handler, tz="Europe/Paris", name="nightly")
    [row] = await tool.schedules()
    assert datetime.fromtimestamp(row["next_fire"], paris) == datetime(2027, 3, 27, 3, 0, tzinfo=paris)
    clock.now = row["next_fire"]
    assert await tool.tick() == 1
    [row] = await tool.schedules()
    # 28 March 2027 is the switch to summer time in Paris: 03:00 local is 01:00 UTC, not 02:00.
    assert datetime.fromtimestamp(row["next_fire"], UTC) == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)


def test_a_bad_cron_expression_or_time_zone_is_refused_at_registration() -> None:
    from tools.scheduler.scheduler_tool import SchedulerTool

    tool = SchedulerTool()
    with pytest.raises(ValueError, match="cron"):
        tool.cron("61 * * * *", lambda job: None)
    with pytest.raises(ValueError, match="time zone"):
        tool.cron("0 3 * * *", lambda job: None, tz="Mars/Olympus")
    with pytest.raises(ValueError, match="catch_up"):
        tool.every(1, lambda job: None, catch_up="always")


async def test_a_one_shot_job_runs_once_at_its_time_with_its_payload(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    seen, handler = recorder()
    tool.on_job("remind", handler)
    job_id = await tool.after(60, "remind", {"user": 7})
    assert await tool.tick() == 0
    clock.advance(60)
    assert await tool.tick() == 1
    assert await tool.tick() == 0
    assert seen[0]["payload"] == {"user": 7} and seen[0]["id"] == job_id and seen[0]["attempt"] == 1
    job = await tool.job(job_id)
    assert job is not None and job["status"] == "done" and job["attempts"] == 1


async def test_the_same_idempotency_key_twice_is_one_job(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    seen, handler = recorder()
    tool.on_job("remind", handler)
    when = datetime.fromtimestamp(clock.now + 5, UTC)
    first = await tool.at(when, "remind", {"n": 1}, key="remind:7")
    second = await tool.at(when, "remind", {"n": 2}, key="remind:7")
    assert first == second
    clock.advance(5)
    await tool.tick()
    assert [j["payload"] for j in seen] == [{"n": 1}]
    assert await tool.at(when, "remind", {"n": 3}, key="remind:7") == first  # also once it has run
    assert len(await tool.jobs()) == 1


async def test_a_restart_across_a_due_time_fires_once(start: Start, clock: FakeClock) -> None:
    before = await start(clock)
    seen, handler = recorder()
    before.every(60, handler, name="report")
    before.on_job("remind", handler)
    await before.tick()
    await before.after(30, "remind", {"while": "down"})
    await before.shutdown()

    clock.advance(600)  # down for ten minutes: ten ticks and the job came due
    after = await start(clock)
    after.every(60, handler, name="report")
    after.on_job("remind", handler)
    assert await after.tick() == 2
    assert await after.tick() == 0
    assert sorted(str(j["schedule"] or j["payload"]) for j in seen) == ["report", "{'while': 'down'}"]


async def test_catch_up_skip_drops_a_tick_found_too_late(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    tool.misfire_grace = 30
    seen, handler = recorder()
    tool.every(60, handler, name="ping", catch_up="skip")
    await tool.tick()
    clock.advance(70)  # 10 s late: within the grace
    assert await tool.tick() == 1
    clock.advance(200)  # 150 s late: skipped
    assert await tool.tick() == 0
    [row] = await tool.schedules()
    assert row["last_status"] == "skipped" and row["next_fire"] > clock.now
    assert len(seen) == 1


async def test_a_changed_spec_starts_again_from_now(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    _, handler = recorder()
    tool.every(60, handler, name="ping")
    await tool.tick()
    tool.every(5, handler, name="ping")
    [row] = await tool.schedules()
    assert row["spec"] == "every:5.0" and row["next_fire"] == pytest.approx(clock.now + 5)


async def test_sync_handlers_run_too(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    seen: list[Any] = []
    tool.on_job("plain", lambda job: seen.append(job["payload"]))
    await tool.after(0, "plain", [1, 2])
    await tool.tick()
    assert seen == [[1, 2]]
