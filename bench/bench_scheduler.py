"""The scheduler: jobs fired per second by one and by two processes, and due -> handler-start latency.

Run: ``.venv/bin/python bench/bench_scheduler.py``   (about a minute; PostgreSQL figures need the
local server at ``DATABASE_URL_TEST`` or ``postgresql://postgres@127.0.0.1:5432/test``)

1. Throughput. Worker processes (``python bench_scheduler.py worker ...``) each serve a ``scheduler``
   tool with a trivial handler for jobs named ``bench`` (``SCHEDULER_CONCURRENCY=64``,
   ``SCHEDULER_POLL_SECONDS=0.01``). Once they are up, ``JOBS`` jobs due a moment later are
   inserted; the figure is jobs / (time from their due time until the last is recorded done), for
   one worker and for two. The floor baseline does the least a durable queue must do per job on
   the same database, from one connection: commit the job's outcome in a transaction of its own
   (no claim, no lease, no handler); the ratio is scheduler jobs/s over baseline jobs/s.
2. Latency (one process, SQLite): ``LATENCY_JOBS`` jobs due 20 ms apart; p50 and p99 of the time
   from each job's due time to the start of its handler, against the floor of ``asyncio``
   sleeping until the same due times in the same process.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.registry import Registry  # noqa: E402
from tools.scheduler.scheduler_tool import SchedulerTool  # noqa: E402

JOBS = 2000
LATENCY_JOBS = 150
PG = os.environ.get("DATABASE_URL_TEST", "").strip() or "postgresql://postgres@127.0.0.1:5432/test"


def emit(name: str, value: float, unit: str) -> None:
    print(f"{name}: {value:.4g} {unit}", flush=True)


async def tool_on(url: str, root: Path, **env: str) -> SchedulerTool:
    os.environ.update({"SCHEDULER_URL": url, **env})
    tool = SchedulerTool()
    tool.bind(project_root=root, registry=Registry())
    await tool.setup()
    return tool


async def worker(url: str, root: str, ready: str) -> None:
    tool = await tool_on(url, Path(root), SCHEDULER_CONCURRENCY="64", SCHEDULER_POLL_SECONDS="0.01")
    tool.on_job("bench", lambda job: None)
    Path(ready).touch()  # noqa: ASYNC240 (once, before serving)
    await tool.serve(asyncio.Event())


async def throughput(url: str, root: Path, processes: int) -> float:
    ready = [root / f"ready-{uuid.uuid4().hex}" for _ in range(processes)]
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, __file__, "worker", url, str(root), str(flag), env={**os.environ}
        )
        for flag in ready
    ]
    tool = await tool_on(url, root)
    try:
        while not all(flag.exists() for flag in ready):  # noqa: ASYNC110, ASYNC240 (other processes')
            await asyncio.sleep(0.05)
        due = time.time() + 1.0
        store = tool._ready()
        async with store.db.transaction() as c:
            for n in range(JOBS):
                job_id = uuid.uuid4().hex
                await c.execute(
                    "INSERT INTO keel_sched_jobs (id, key, name, payload, due_at, status, attempts, "
                    "max_attempts, epoch, created_at) "
                    "VALUES ($1, $1, 'bench', $2, $3, 'pending', 0, 1, 0, $4)",
                    job_id,
                    json.dumps(n),
                    due,
                    time.time(),
                )
        while (await store.counts()).get("done", 0) < JOBS:  # noqa: ASYNC110 (other processes' rows)
            await asyncio.sleep(0.02)
        elapsed = time.time() - due
        async with store.db.transaction() as c:
            last = (await c.fetch("SELECT max(finished_at) AS t FROM keel_sched_jobs"))[0]["t"]
            await c.execute("DELETE FROM keel_sched_jobs")
        return JOBS / min(elapsed, float(last) - due)
    finally:
        for child in children:
            child.kill()
            await child.wait()
        await tool.shutdown()


async def baseline(url: str, root: Path) -> float:
    """Mark each job done in a transaction of its own, from one connection: the floor of a durable
    queue (a job's outcome must be committed on its own; the scheduler also claims, leases, fences
    and calls a handler)."""
    tool = await tool_on(url, root)
    store = tool._ready()
    count = JOBS // 4
    try:
        async with store.db.transaction() as c:
            for n in range(count):
                await c.execute(
                    "INSERT INTO keel_sched_jobs (id, key, name, payload, due_at, status, attempts, "
                    "max_attempts, epoch, created_at) "
                    "VALUES ($1, $1, 'floor', '0', 0, 'running', 1, 1, 1, 0)",
                    f"floor-{n}",
                )
        started = time.perf_counter()
        for n in range(count):
            async with store.db.transaction() as c:
                await c.execute(
                    "UPDATE keel_sched_jobs SET status = 'done', finished_at = $2 "
                    "WHERE id = $1 AND epoch = 1",
                    f"floor-{n}",
                    time.time(),
                )
        elapsed = time.perf_counter() - started
        async with store.db.transaction() as c:
            await c.execute("DELETE FROM keel_sched_jobs")
        return count / elapsed
    finally:
        await tool.shutdown()


async def latency(root: Path) -> None:
    tool = await tool_on(f"sqlite:///{root}/latency.db", root, SCHEDULER_POLL_SECONDS="1")
    lags: list[float] = []
    tool.on_job("lag", lambda job: lags.append(time.time() - job["due_at"]))
    stop = asyncio.Event()
    serving = asyncio.ensure_future(tool.serve(stop))
    start = time.time() + 0.5
    for n in range(LATENCY_JOBS):
        await tool.at(start + n * 0.02, "lag")
    while len(lags) < LATENCY_JOBS:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    stop.set()
    await serving
    await tool.shutdown()

    floor: list[float] = []
    start = time.time() + 0.1
    for n in range(LATENCY_JOBS):
        due = start + n * 0.02
        await asyncio.sleep(max(0.0, due - time.time()))
        floor.append(time.time() - due)
    for name, values in (("scheduler", lags), ("floor_asyncio_sleep", floor)):
        cuts = statistics.quantiles(values, n=100)
        emit(f"scheduler_latency_{name}_p50", cuts[49] * 1000, "ms")
        emit(f"scheduler_latency_{name}_p99", cuts[98] * 1000, "ms")


async def postgres_schema() -> tuple[str, Any] | None:
    try:
        import asyncpg

        admin = await asyncpg.connect(PG, timeout=3)
    except Exception as exc:  # no server: the PostgreSQL figures are skipped
        print(f"# PostgreSQL unavailable ({exc}); skipping its figures", flush=True)
        return None
    schema = f"keel_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f"CREATE SCHEMA {schema}")
    return f"{PG}{'&' if '?' in PG else '?'}search_path={schema}", (admin, schema)


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-scheduler-"))
    engines: list[tuple[str, str]] = [("sqlite", f"sqlite:///{root}/bench.db")]
    pg = await postgres_schema()
    if pg is not None:
        engines.append(("postgres", pg[0]))
    try:
        for engine, url in engines:
            floor = await baseline(url, root)
            emit(f"scheduler_{engine}_floor_commit_per_job", floor, "jobs/s")
            for processes in (1, 2):
                rate = await throughput(url, root, processes)
                emit(f"scheduler_{engine}_jobs_fired_{processes}_process", rate, "jobs/s")
                emit(f"scheduler_{engine}_jobs_fired_{processes}_process_ratio", rate / floor, "x")
        await latency(root)
    finally:
        if pg is not None:
            admin, schema = pg[1]
            await admin.execute(f"DROP SCHEMA {schema} CASCADE")
            await admin.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(worker(*sys.argv[2:5]))
    else:
        asyncio.run(main())
