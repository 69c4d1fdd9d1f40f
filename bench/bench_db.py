"""What the ``db`` tool costs on SQLite against raw aiosqlite, and how it behaves under contention.

Run: ``.venv/bin/python bench/bench_db.py``   (about 30 s)

1. 10,000 single-row INSERTs inside one transaction, and 1,000 single-row INSERTs each in its own
   (autocommit) statement, through the ``db`` tool as a plugin calls it (through the ToolProxy,
   which adds its own per-call bookkeeping) and through raw aiosqlite with the same pragmas
   (WAL, synchronous=NORMAL, foreign_keys=ON, busy_timeout). Each configuration gets a fresh
   database file; the configurations are interleaved (in alternating order), the median of the
   repeats is reported, and the ratio is
   raw time / db time (1.0 = as fast as raw, target >= 0.95). The same figure without the proxy
   is printed as ``..._direct_ratio`` to separate the tool's cost from the kernel's.
2. 50 tasks each incrementing one counter 100 times, every increment in its own transaction:
   wall time, the final count (must be exactly 5000) and how many calls raised.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiosqlite  # noqa: E402

from core import Kernel  # noqa: E402

REPEATS = {"insert_10k_one_tx": 9, "insert_1k_autocommit": 31}  # the short run needs more samples
TX_ROWS = 10_000
SINGLE_ROWS = 1_000
TASKS, INCREMENTS = 50, 100
PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA busy_timeout = 5000",
)
TABLE = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL)"


def emit(name: str, value: float, unit: str) -> None:
    print(f"{name}: {value:.4g} {unit}", flush=True)


class Workspace:
    """A temporary project root holding only the db tool, and fresh database files on demand."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="keel-bench-db-"))
        self.root = self.dir / "root"
        (self.root / "tools" / "db").mkdir(parents=True)
        for source in (ROOT / "tools" / "db").glob("*.py"):  # per file: rglob skips linked folders
            (self.root / "tools" / "db" / source.name).symlink_to(source)
        self.counter = 0

    def fresh_file(self) -> Path:
        self.counter += 1
        return self.dir / f"bench-{self.counter}.db"

    async def kernel(self, path: Path) -> Kernel:
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
        kernel = Kernel(self.root)
        await kernel.boot(plugins=False)
        return kernel


async def raw_run(path: Path, body: Callable[[Any], Awaitable[None]]) -> float:
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        for pragma in PRAGMAS:
            await conn.execute(pragma)
        await conn.execute(TABLE)
        started = time.perf_counter()
        await body(conn)
        return time.perf_counter() - started


async def raw_tx(conn: Any) -> None:
    await conn.execute("BEGIN IMMEDIATE")
    for i in range(TX_ROWS):
        await conn.execute("INSERT INTO items (name, qty) VALUES (?, ?)", (f"item-{i}", i))
    await conn.execute("COMMIT")


async def raw_single(conn: Any) -> None:
    for i in range(SINGLE_ROWS):
        await conn.execute("INSERT INTO items (name, qty) VALUES (?, ?)", (f"item-{i}", i))


async def keel_run(ws: Workspace, body: Callable[[Any], Awaitable[None]], *, proxy: bool) -> float:
    kernel = await ws.kernel(ws.fresh_file())
    try:
        db: Any = kernel.container.get("db") if proxy else kernel.container.get_raw_tools()["db"]
        await db.execute(TABLE)
        started = time.perf_counter()
        await body(db)
        return time.perf_counter() - started
    finally:
        await kernel.shutdown()


async def keel_tx(db: Any) -> None:
    async with db.transaction():
        for i in range(TX_ROWS):
            await db.execute("INSERT INTO items (name, qty) VALUES ($1, $2)", (f"item-{i}", i))


async def keel_single(db: Any) -> None:
    for i in range(SINGLE_ROWS):
        await db.execute("INSERT INTO items (name, qty) VALUES ($1, $2)", (f"item-{i}", i))


async def compare(ws: Workspace, label: str, raw_body: Any, keel_body: Any) -> None:
    raw: list[float] = []
    proxied: list[float] = []
    direct: list[float] = []
    runs: list[tuple[list[float], Callable[[], Awaitable[float]]]] = [
        (raw, lambda: raw_run(ws.fresh_file(), raw_body)),
        (proxied, lambda: keel_run(ws, keel_body, proxy=True)),
        (direct, lambda: keel_run(ws, keel_body, proxy=False)),
    ]
    for repeat in range(REPEATS[label]):
        # A B C, then C B A: a drift in the machine's load does not favour whoever runs first
        for samples, run in runs if repeat % 2 == 0 else reversed(runs):
            samples.append(await run())
    raw_ms, keel_ms, direct_ms = (statistics.median(x) * 1000 for x in (raw, proxied, direct))
    emit(f"db_{label}_raw_aiosqlite", raw_ms, "ms")
    emit(f"db_{label}_keel", keel_ms, "ms")
    emit(f"db_{label}_ratio", raw_ms / keel_ms, "x")
    emit(f"db_{label}_direct_ratio", raw_ms / direct_ms, "x")


async def contention(ws: Workspace) -> None:
    kernel = await ws.kernel(ws.fresh_file())
    try:
        db = kernel.container.get("db")
        await db.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
        await db.execute("INSERT INTO counter (id, value) VALUES (1, 0)")
        errors = 0

        async def worker() -> None:
            nonlocal errors
            for _ in range(INCREMENTS):
                try:
                    async with db.transaction():
                        value = await db.scalar("SELECT value FROM counter WHERE id = 1")
                        await db.execute("UPDATE counter SET value = $1 WHERE id = 1", (value + 1,))
                except Exception:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(TASKS)))
        elapsed = time.perf_counter() - started
        emit("db_concurrent_increments_time", elapsed * 1000, "ms")
        emit("db_concurrent_increments_final_count", await db.scalar("SELECT value FROM counter"), "rows")
        emit("db_concurrent_increments_errors", errors, "calls")
        emit("db_concurrent_increments_rate", TASKS * INCREMENTS / elapsed, "tx/s")
    finally:
        await kernel.shutdown()


async def main() -> None:
    ws = Workspace()
    await compare(ws, "insert_10k_one_tx", raw_tx, keel_tx)
    await compare(ws, "insert_1k_autocommit", raw_single, keel_single)
    await contention(ws)


if __name__ == "__main__":
    asyncio.run(main())
