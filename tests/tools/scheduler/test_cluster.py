"""Several schedulers on one database: each tick and each job is fired by exactly one of them, a job
held by a process that dies runs once elsewhere, and a holder that was fenced out records nothing.

"Processes" are tool instances sharing the database (fake clock) and real OS processes
(``worker.py``, real time, killed with SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from asyncio.subprocess import Process
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.kit import until
from tests.tools.scheduler.conftest import FakeClock, Start

WORKER = Path(__file__).with_name("worker.py")
PROJECT = Path(__file__).resolve().parents[3]


async def test_three_schedulers_fire_each_tick_once(start: Start, clock: FakeClock) -> None:
    tools = [await start(clock) for _ in range(3)]
    fired: list[tuple[int, float]] = []
    for index, tool in enumerate(tools):

        async def tick(job: dict[str, Any], index: int = index) -> None:
            fired.append((index, job["due_at"]))

        tool.every(1, tick, name="shared")
    await asyncio.gather(*(t.tick() for t in tools))
    for _ in range(20):
        clock.advance(1)
        await asyncio.gather(*(t.tick() for t in tools))
    dues = [due for _, due in fired]
    assert len(dues) == 20 and len(set(dues)) == 20
    assert sorted(dues) == pytest.approx([clock.now - 19 + i for i in range(20)])


async def test_three_schedulers_share_one_shot_jobs_without_running_any_twice(
    start: Start, clock: FakeClock
) -> None:
    tools = [await start(clock) for _ in range(3)]
    ran: Counter[int] = Counter()
    for tool in tools:
        tool.concurrency = 4
        tool.on_job("work", lambda job: ran.update([job["payload"]]))
    for n in range(30):
        await tools[n % 3].after(0, "work", n)
    while sum(ran.values()) < 30:
        counts = await asyncio.gather(*(t.tick() for t in tools))
        assert sum(counts) > 0
    assert ran == Counter(range(30))


async def test_a_job_whose_holder_stopped_renewing_is_taken_over_and_the_old_holder_is_fenced_out(
    start: Start, clock: FakeClock
) -> None:
    first, second = await start(clock), await start(clock)
    release = asyncio.Event()
    runs: list[str] = []

    async def stuck(job: dict[str, Any]) -> None:
        runs.append(f"first@{job['epoch']}")
        await release.wait()

    first.on_job("job", stuck)
    second.on_job("job", lambda job: runs.append(f"second@{job['epoch']}"))
    job_id = await first.after(0, "job")
    held = asyncio.ensure_future(first.tick())
    await until(lambda: runs == ["first@1"], "the first scheduler holds the job")
    assert await second.tick() == 0  # its lease holds
    clock.advance(first.lease + 1)
    assert await second.tick() == 1
    assert runs == ["first@1", "second@2"]
    release.set()
    await held
    job = await second.job(job_id)
    assert job is not None and job["status"] == "done" and job["epoch"] == 2 and job["attempts"] == 2
    assert first.fired == 0 and second.fired == 1


@asynccontextmanager
async def workers(root: Path, count: int, *args: str) -> AsyncIterator[list[Process]]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    processes = [
        await asyncio.create_subprocess_exec(sys.executable, str(WORKER), str(root), *args, env=env)
        for _ in range(count)
    ]
    try:
        yield processes
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
            await asyncio.wait_for(process.wait(), 10)


def lines(file: Path) -> list[str]:
    return file.read_text().splitlines() if file.exists() else []


async def test_three_processes_fire_each_tick_once(scheduler_url: str, tmp_path: Path) -> None:
    out = tmp_path / "ticks.log"
    async with workers(tmp_path, 3, "ticks", str(out), "0.2", "inf"):
        await until(lambda: sum(x.startswith("ready") for x in lines(out)) == 3, "three workers ready", 60)
        ready = len(lines(out))

        def ticks() -> list[tuple[str, float]]:
            fired = (x.split() for x in lines(out) if not x.startswith("ready"))
            return [(pid, float(due)) for pid, due in fired]

        started = len(ticks())
        await until(lambda: len(ticks()) >= started + 15, "15 ticks fired after all three were up", 60)
    assert ready >= 3
    dues = [due for _, due in ticks()]
    assert len(dues) == len(set(dues)), Counter(dues).most_common(3)


async def test_a_process_killed_holding_a_job_leaves_it_to_run_once_elsewhere(
    start: Start, scheduler_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDULER_LEASE_SECONDS", "1")
    monkeypatch.setenv("SCHEDULER_POLL_SECONDS", "0.05")
    out = tmp_path / "held.log"
    survivor = await start()
    job_id = await survivor.after(0, "held", {"n": 1})
    async with workers(tmp_path, 1, "hold", str(out)) as [victim]:
        await until(lambda: any(x.startswith("started") for x in lines(out)), "the worker holds the job", 60)
        victim.send_signal(signal.SIGKILL)
        await asyncio.wait_for(victim.wait(), 10)
    held = await survivor.job(job_id)
    assert held is not None and held["status"] == "running" and held["epoch"] == 1

    runs: list[dict[str, Any]] = []
    survivor.on_job("held", runs.append)
    stop = asyncio.Event()
    serving = asyncio.ensure_future(survivor.serve(stop))
    try:
        await until(lambda: len(runs) == 1, "the job runs again once its lease has run out")
        await until(lambda: _status(survivor, job_id, "done"), "the survivor records the job as done")
    finally:
        stop.set()
        await serving
    job = await survivor.job(job_id)
    assert job is not None and job["attempts"] == 2 and job["epoch"] == 2 and len(runs) == 1
    assert runs[0]["attempt"] == 2 and runs[0]["payload"] == {"n": 1}


async def _status(tool: Any, job_id: str, status: str) -> bool:
    job = await tool.job(job_id)
    return job is not None and job["status"] == status


async def test_a_renewed_lease_keeps_a_long_job_with_its_holder(start: Start) -> None:
    holder, other = await start(), await start()
    for tool in (holder, other):
        tool.lease = 0.6
    release = asyncio.Event()
    runs: list[str] = []

    async def long(job: dict[str, Any]) -> None:
        runs.append("holder")
        await release.wait()

    holder.on_job("long", long)
    other.on_job("long", lambda job: runs.append("other"))
    job_id = await holder.after(0, "long")
    held = asyncio.ensure_future(holder.tick())
    await until(lambda: runs == ["holder"], "the holder runs the job")
    started = asyncio.get_running_loop().time()
    while asyncio.get_running_loop().time() - started < 2.0:  # three leases and more
        assert await other.tick() == 0
        await asyncio.sleep(0.05)  # the other's poll interval (pacing, not synchronisation)
    release.set()
    await held
    job = await holder.job(job_id)
    assert job is not None and job["status"] == "done" and job["epoch"] == 1 and runs == ["holder"]


async def test_cancelling_a_running_job_elsewhere_stops_its_handler(start: Start) -> None:
    holder, other = await start(), await start()
    holder.lease = 0.3
    stopped = asyncio.Event()
    entered = asyncio.Event()

    async def long(job: dict[str, Any]) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    holder.on_job("long", long)
    job_id = await holder.after(0, "long")
    held = asyncio.ensure_future(holder.tick())
    await asyncio.wait_for(entered.wait(), 15)
    assert await other.cancel(job_id)
    await asyncio.wait_for(stopped.wait(), 15)  # at the holder's next lease renewal
    await held
    job = await other.job(job_id)
    assert job is not None and job["status"] == "cancelled" and holder.fired == 0
