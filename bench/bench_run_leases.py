"""Agent-run bookkeeping per second: lease renewals and checkpoint saves, on SQLite and PostgreSQL.

Run: ``.venv/bin/python bench/bench_run_leases.py``   (about 20 s; PostgreSQL at
``DATABASE_URL_TEST`` or ``postgresql://postgres@127.0.0.1:5432/test``)

* ``renew``: one ``RunIndex.renew`` call for ``RUNS`` runs leased to this process (what the lease
  loop does every ``AGENT_RUN_LEASE_SECONDS / 3``), as calls/s and as run-renewals/s;
* ``save``: checkpoint saves of one run, each one version above the last with a ~2 KB state (what
  a run does around every tool call), as saves/s, one run at a time and ``RUNS`` runs at once.

The floor is the same work on the in-memory checkpoint store (saves) — the cost of the port alone.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from bench._util import emit  # noqa: E402
from core import Kernel  # noqa: E402
from core.contracts.ports import Checkpoint, CheckpointStatus  # noqa: E402
from core.runs.index import RunIndex  # noqa: E402
from core.state.checkpoints import InMemoryCheckpointStore  # noqa: E402

RUNS, RENEWALS, SAVES = 50, 200, 300
PG = os.environ.get("DATABASE_URL_TEST", "postgresql://postgres@127.0.0.1:5432/test")
STATE = {"transcript": [{"role": "user", "content": "x" * 100}] * 15, "epoch": 0}


def workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-leases-")) / "root"
    (root / "tools").mkdir(parents=True)
    for tool in ("db", "checkpoint"):
        (root / "tools" / tool).mkdir()
        for source in (ROOT / "tools" / tool).glob("*.py"):
            (root / "tools" / tool / source.name).symlink_to(source)
    # Code the tools share (the checkpoint's PostgreSQL pool) comes with them.
    (root / "tools" / "_shared").symlink_to(ROOT / "tools" / "_shared", target_is_directory=True)
    (root / "migrations").symlink_to(ROOT / "migrations", target_is_directory=True)
    return root


async def saves(checkpoint: Any, runs: int) -> float:
    async def one(run_id: str) -> None:
        for version in range(1, SAVES // runs + 1):
            await checkpoint.save(Checkpoint(run_id, version, STATE, time.time(), CheckpointStatus.RUNNING))

    started = time.perf_counter()
    await asyncio.gather(*(one(uuid.uuid4().hex) for _ in range(runs)))
    return (SAVES // runs) * runs / (time.perf_counter() - started)


async def measure(label: str, url: str, root: Path) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.pop("CHECKPOINT_URL", None)
    kernel = Kernel(root)
    await kernel.boot(plugins=False)
    try:
        db = kernel.container.get("db")
        index = RunIndex(db, lease_seconds=15)
        ids = [uuid.uuid4().hex for _ in range(RUNS)]
        for run_id in ids:
            await index.add(run_id, "bench", time.time())
        started = time.perf_counter()
        for _ in range(RENEWALS):
            assert len(await index.renew(ids)) == RUNS
        rate = RENEWALS / (time.perf_counter() - started)
        emit(f"agents_{label}_lease_renew_calls", rate, f"calls/s ({RUNS} runs each)")
        emit(f"agents_{label}_lease_renewals", rate * RUNS, "run-renewals/s")
        checkpoint = kernel.container.get("checkpoint")
        emit(f"agents_{label}_checkpoint_saves_1_run", await saves(checkpoint, 1), "saves/s")
        emit(f"agents_{label}_checkpoint_saves_{RUNS}_runs", await saves(checkpoint, RUNS), "saves/s")
    finally:
        await kernel.shutdown()


async def main() -> None:
    root = workspace()
    emit("agents_memory_checkpoint_saves_1_run", await saves(InMemoryCheckpointStore(), 1), "saves/s (floor)")
    await measure("sqlite", f"sqlite:///{root.parent / 'bench.db'}", root)
    connection = await asyncpg.connect(PG, timeout=3)
    schema = f"keel_bench_{uuid.uuid4().hex[:10]}"
    await connection.execute(f"CREATE SCHEMA {schema}")
    try:
        await measure("postgres", f"{PG}{'&' if '?' in PG else '?'}search_path={schema}", root)
    finally:
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await connection.close()


if __name__ == "__main__":
    asyncio.run(main())
