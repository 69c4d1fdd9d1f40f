"""What the ``db`` tool costs on SQLite against stdlib sqlite3 and aiosqlite, on PostgreSQL against
a raw asyncpg pool, and how it behaves under contention.

Run: ``.venv/bin/python bench/bench_db.py``   (about 60 s; the PostgreSQL part needs
``DATABASE_URL_TEST`` or ``postgresql://postgres@127.0.0.1:5432/test`` and is skipped without it)

0. The 10,000-row transaction against the floor, stdlib ``sqlite3`` called directly on the loop's
   thread (no thread hop at all), through the tool's three ways of writing many rows in one block:
   a statement each (``await db.execute``: one hop to the connection's thread per statement),
   ``db.defer`` (every statement of the block in the hop of its COMMIT) and ``db.executemany``
   (one hop). Ratio = sqlite3 time / tool time (goal >= 0.5 for ``defer``).

1. 10,000 single-row INSERTs inside one transaction, and 1,000 single-row INSERTs each in its own
   (autocommit) statement, through the ``db`` tool as a plugin calls it (through the ToolProxy,
   which adds its own per-call bookkeeping) and through raw aiosqlite with the same pragmas
   (WAL, synchronous=NORMAL, foreign_keys=ON, busy_timeout). Each configuration gets a fresh
   database file; the configurations are interleaved (in alternating order), the median of the
   repeats is reported, and the ratio is
   raw time / db time (1.0 = as fast as raw). The same figure without the proxy
   is printed as ``..._direct_ratio`` to separate the tool's cost from the kernel's.
2. PostgreSQL: 10,000 single-row INSERTs in one transaction, the tool (a statement each, and
   ``defer``) against a raw asyncpg pool doing the same statements on one acquired connection in
   ``connection.transaction()`` at the same isolation level: ``serializable``, the tool's default
   (it costs the server about 7 % more per row than ``read committed``, asyncpg's default), and
   beside it both at ``read committed``. Ratio = the median over the rounds of raw time / tool
   time in that round (goal >= 0.95).
3. 50 tasks each incrementing one counter 100 times, every increment in its own transaction:
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

from bench._util import emit, emit_ratio  # noqa: E402
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


PG_URL = os.environ.get("DATABASE_URL_TEST", "postgresql://postgres@127.0.0.1:5432/test")
PG_REPEATS = 9
INSERT = "INSERT INTO items (name, qty) VALUES ($1, $2)"


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


async def keel_tx(db: Any, isolation: str | None = None) -> None:
    async with db.transaction(isolation):
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
    floor = f"aiosqlite with the same pragmas, {raw_ms:.4g} ms"
    emit_ratio(f"db_{label}_ratio", raw_ms / keel_ms, floor, "level with aiosqlite (~1.0x)")
    emit_ratio(f"db_{label}_direct_ratio", raw_ms / direct_ms, floor, "level with aiosqlite (~1.0x)")


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


def sqlite3_tx(path: Path) -> float:
    """The floor: stdlib sqlite3 on this thread, same pragmas, same statements, one transaction."""
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
        conn.execute(TABLE)
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        for i in range(TX_ROWS):
            conn.execute("INSERT INTO items (name, qty) VALUES (?, ?)", (f"item-{i}", i))
        conn.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        conn.close()


async def keel_tx_deferred(db: Any) -> None:
    async with db.transaction() as tx:
        defer = tx.defer
        for i in range(TX_ROWS):
            defer(INSERT, (f"item-{i}", i))


async def keel_tx_executemany(db: Any) -> None:
    async with db.transaction() as tx:
        await tx.executemany(INSERT, [(f"item-{i}", i) for i in range(TX_ROWS)])


async def against_sqlite3(ws: Workspace) -> None:
    samples: dict[str, list[float]] = {"sqlite3": [], "execute": [], "defer": [], "executemany": []}
    bodies = {"execute": keel_tx, "defer": keel_tx_deferred, "executemany": keel_tx_executemany}
    for repeat in range(REPEATS["insert_10k_one_tx"]):
        order = ["sqlite3", *bodies]
        for label in order if repeat % 2 == 0 else reversed(order):
            if label == "sqlite3":
                samples[label].append(sqlite3_tx(ws.fresh_file()))
            else:
                samples[label].append(await keel_run(ws, bodies[label], proxy=True))
    floor_ms = statistics.median(samples["sqlite3"]) * 1000
    emit("db_insert_10k_one_tx_sqlite3_direct", floor_ms, "ms")
    floor = f"stdlib sqlite3 called directly, {floor_ms:.4g} ms"
    for label in bodies:
        ms = statistics.median(samples[label]) * 1000
        emit(f"db_insert_10k_one_tx_keel_{label}", ms, "ms")
        goal = ">= 0.5x" if label != "execute" else "none (a thread hop per statement; use defer)"
        emit_ratio(f"db_insert_10k_one_tx_{label}_vs_sqlite3", floor_ms / ms, floor, goal)
        lo, hi = (x * 1000 for x in (min(samples[label]), max(samples[label])))
        emit(f"db_insert_10k_one_tx_keel_{label}_range_low", lo, "ms")
        emit(f"db_insert_10k_one_tx_keel_{label}_range_high", hi, "ms")


async def postgres_tx() -> None:
    """10k INSERTs in one transaction on PostgreSQL: raw asyncpg pool vs the tool."""
    import asyncpg

    try:
        probe = await asyncpg.connect(PG_URL, timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"# PostgreSQL not reachable at {PG_URL} ({exc}); its figures are skipped", flush=True)
        return
    await probe.close()
    schema = f"bench_{os.getpid()}"
    admin = await asyncpg.connect(PG_URL)
    await admin.execute(f"CREATE SCHEMA {schema}")
    try:
        url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}search_path={schema}"
        pool = await asyncpg.create_pool(
            PG_URL, min_size=1, max_size=10, server_settings={"search_path": schema}
        )
        await pool.execute(TABLE.replace("INTEGER PRIMARY KEY", "SERIAL PRIMARY KEY"))

        async def raw(isolation: str) -> float:
            await pool.execute("TRUNCATE items")
            started = time.perf_counter()
            async with pool.acquire() as conn, conn.transaction(isolation=isolation):
                for i in range(TX_ROWS):
                    await conn.execute(INSERT, f"item-{i}", i)
            return time.perf_counter() - started

        ws = Workspace()
        os.environ["DATABASE_URL"] = url
        kernel = Kernel(ws.root)
        await kernel.boot(plugins=False)
        db: Any = kernel.container.get("db")

        async def keel(body: Callable[[Any], Awaitable[None]]) -> float:
            await db.execute("TRUNCATE items")
            started = time.perf_counter()
            await body(db)
            return time.perf_counter() - started

        samples: dict[str, list[float]] = {
            "raw": [],
            "execute": [],
            "defer": [],
            "raw_rc": [],
            "execute_rc": [],
        }
        runs: list[tuple[str, Callable[[], Awaitable[float]]]] = [
            ("raw", lambda: raw("serializable")),
            ("execute", lambda: keel(keel_tx)),
            ("defer", lambda: keel(keel_tx_deferred)),
            ("raw_rc", lambda: raw("read_committed")),
            ("execute_rc", lambda: keel(lambda db: keel_tx(db, "read_committed"))),
        ]
        try:
            for repeat in range(PG_REPEATS):
                for label, run in runs if repeat % 2 == 0 else reversed(runs):
                    samples[label].append(await run())
        finally:
            await kernel.shutdown()
            await pool.close()
        for raw_label, labels, level in (
            ("raw", ("execute", "defer"), "serializable"),
            ("raw_rc", ("execute_rc",), "read committed"),
        ):
            raw_ms = statistics.median(samples[raw_label]) * 1000
            suffix = "_rc" if raw_label == "raw_rc" else ""
            emit(f"db_pg_insert_10k_one_tx_raw_asyncpg{suffix}", raw_ms, "ms")
            floor = f"a raw asyncpg pool, a statement each in one {level} transaction, {raw_ms:.4g} ms"
            for label in labels:
                ms = statistics.median(samples[label]) * 1000
                emit(f"db_pg_insert_10k_one_tx_keel_{label}", ms, "ms")
                # Each round's runs are adjacent in time; a single run swings +-20 % with the
                # server's own work, so the ratio is taken per round (then the median), which a
                # drift over the run cannot tilt.
                ratio = statistics.median(
                    r / k for r, k in zip(samples[raw_label], samples[label], strict=True)
                )
                emit_ratio(
                    f"db_pg_insert_10k_one_tx_{label}_ratio", ratio, f"{floor}, ratio per round", ">= 0.95x"
                )
    finally:
        await admin.execute(f"DROP SCHEMA {schema} CASCADE")
        await admin.close()


async def main() -> None:
    ws = Workspace()
    await against_sqlite3(ws)
    await postgres_tx()
    await compare(ws, "insert_10k_one_tx", raw_tx, keel_tx)
    await compare(ws, "insert_1k_autocommit", raw_single, keel_single)
    await contention(ws)


if __name__ == "__main__":
    asyncio.run(main())
