"""Failing jobs: retried with backoff, then kept as failed with the error; cancel and re-run; a job
whose outcome the database would not take is reported and runs again."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.tools.scheduler.conftest import FakeClock, Start


async def test_a_failing_job_is_retried_with_backoff_then_succeeds(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    tool.backoff = 10
    attempts: list[tuple[int, float]] = []

    def flaky(job: dict[str, Any]) -> None:
        attempts.append((job["attempt"], clock.now))
        if job["attempt"] < 3:
            raise RuntimeError(f"boom {job['attempt']}")

    tool.on_job("flaky", flaky)
    job_id = await tool.after(0, "flaky")
    assert await tool.tick() == 1
    pending = await tool.job(job_id)
    assert pending is not None and pending["status"] == "pending"
    assert pending["error"] == "RuntimeError: boom 1"
    assert pending["due_at"] == pytest.approx(clock.now + 10)
    clock.advance(9)
    assert await tool.tick() == 0  # not before its backoff
    clock.advance(1)
    assert await tool.tick() == 1
    clock.advance(19)
    assert await tool.tick() == 0  # the backoff doubled
    clock.advance(1)
    assert await tool.tick() == 1
    done = await tool.job(job_id)
    assert done is not None and done["status"] == "done" and done["attempts"] == 3
    assert [a for a, _ in attempts] == [1, 2, 3]


async def test_a_job_out_of_attempts_is_kept_as_failed_then_can_be_rerun(
    start: Start, clock: FakeClock
) -> None:
    tool = await start(clock)
    tool.backoff = 0
    fail = [True]

    def handler(job: dict[str, Any]) -> None:
        if fail[0]:
            raise ValueError("no such user")

    tool.on_job("remind", handler)
    job_id = await tool.after(0, "remind", max_attempts=2)
    await tool.tick()
    await tool.tick()
    assert await tool.tick() == 0
    failed = await tool.jobs(status="failed")
    assert [(j["id"], j["attempts"], j["error"]) for j in failed] == [(job_id, 2, "ValueError: no such user")]
    status = await tool.status()
    assert status["jobs"] == {"failed": 1} and status["failed"][0]["error"] == "ValueError: no such user"

    assert not await tool.cancel(job_id)  # it has finished
    fail[0] = False
    assert await tool.rerun(job_id)
    assert not await tool.rerun(job_id)  # already pending
    assert await tool.tick() == 1
    job = await tool.job(job_id)
    assert job is not None and job["status"] == "done" and job["attempts"] == 1 and job["error"] is None


async def test_a_cancelled_job_does_not_run(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)
    ran: list[Any] = []
    tool.on_job("remind", ran.append)
    job_id = await tool.after(5, "remind")
    assert await tool.cancel(job_id)
    clock.advance(10)
    assert await tool.tick() == 0
    job = await tool.job(job_id)
    assert job is not None and job["status"] == "cancelled" and ran == []


async def test_a_failing_schedule_tick_is_recorded_as_its_last_result(start: Start, clock: FakeClock) -> None:
    tool = await start(clock)

    def broken(job: dict[str, Any]) -> None:
        raise RuntimeError("disk full")

    tool.every(60, broken, name="cleanup")
    await tool.tick()
    clock.advance(60)
    assert await tool.tick() == 1
    [row] = await tool.schedules()
    assert row["last_status"] == "failed" and row["last_error"] == "RuntimeError: disk full"
    clock.advance(60)
    assert await tool.tick() == 1  # the next tick comes anyway


async def test_jobs_only_run_where_a_handler_for_their_name_is_registered(
    start: Start, clock: FakeClock
) -> None:
    tool = await start(clock)
    job_id = await tool.after(0, "elsewhere")
    assert await tool.tick() == 0
    ran: list[Any] = []
    tool.on_job("elsewhere", ran.append)
    assert await tool.tick() == 1
    assert [j["id"] for j in ran] == [job_id]


async def _rename_jobs_table(url: str, project: Path, old: str, new: str) -> None:
    """Take the jobs table away (or give it back) behind the scheduler's connection."""
    if url.startswith("sqlite"):
        with sqlite3.connect(project / "data" / "scheduler.db", timeout=5) as connection:
            connection.execute(f"ALTER TABLE {old} RENAME TO {new}")
        return
    import asyncpg

    base, _, schema = url.partition("?search_path=")
    connection = await asyncpg.connect(base)
    try:
        await connection.execute(f"ALTER TABLE {schema}.{old} RENAME TO {new}")
    finally:
        await connection.close()


async def test_a_job_whose_outcome_cannot_be_recorded_is_reported_and_runs_again_after_its_lease(
    start: Start, clock: FakeClock, scheduler_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tool = await start(clock)
    attempts: list[int] = []

    async def work(job: dict[str, Any]) -> None:
        attempts.append(job["attempt"])
        if job["attempt"] == 1:  # the database stops taking writes to the jobs table mid-job
            await _rename_jobs_table(scheduler_url, tmp_path, "keel_sched_jobs", "keel_sched_parked")

    tool.on_job("work", work)
    job_id = await tool.after(0, "work")
    with caplog.at_level(logging.ERROR, "keel.scheduler"):
        assert await tool.tick() == 1
    [record] = [r for r in caplog.records if "could not be recorded" in r.getMessage()]
    assert job_id in record.getMessage() and "runs again once its lease ends" in record.getMessage()

    await _rename_jobs_table(scheduler_url, tmp_path, "keel_sched_parked", "keel_sched_jobs")
    held = await tool.job(job_id)
    assert held is not None and held["status"] == "running"  # nothing was recorded
    clock.advance(tool.lease + 1)
    assert await tool.tick() == 1
    done = await tool.job(job_id)
    assert done is not None and done["status"] == "done" and done["attempts"] == 2 and attempts == [1, 2]
