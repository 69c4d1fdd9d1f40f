"""The scheduler's tables and every statement on them, written once for SQLite and PostgreSQL.

Tables (created on first use, like the checkpoint tool's: the scheduler opens its own connection,
from ``SCHEDULER_URL`` or else ``DATABASE_URL``, because tools never share pools; on PostgreSQL the
pool's bootstrap is the one in ``tools/_shared/pg_pool``):

- ``keel_sched_jobs``: one row per one-shot job and per schedule tick. ``key`` is unique (the
  idempotency key; a tick's is ``schedule:<name>:<due>``), so inserting a job twice makes one.
  ``status`` is ``pending``, ``running``, ``done``, ``failed`` or ``cancelled``. A process claims a
  job by raising its ``epoch`` and writing its lease (``lease_owner``, ``lease_until``); renewing
  the lease and recording the outcome are conditional on that epoch (fencing), so a process whose
  lease ran out and whose job was taken over cannot overwrite the new holder's result.
- ``keel_sched_schedules``: one row per schedule name: its spec, owning plugin, ``next_due`` and the
  last fire time and result. Firing a tick is a compare-and-set on ``next_due`` in the same
  transaction as the tick's job insert: whichever process moves ``next_due`` on owns the tick.

Each operation is one transaction. On PostgreSQL a claim skips rows other processes have locked
(``FOR UPDATE SKIP LOCKED``); on SQLite ``BEGIN IMMEDIATE`` serialises writers (across processes
too), and one asyncio lock keeps this process's transactions on its one connection apart.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from core.sqlite_thread import SqliteFile, rollback_if_open
from tools._shared.pg_pool import PgBackend

from .errors import SchedulerUnavailableError

JOBS = """
CREATE TABLE IF NOT EXISTS keel_sched_jobs (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    due_at DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    epoch BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION,
    schedule TEXT,
    plugin TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    error TEXT
)"""
SCHEDULES = """
CREATE TABLE IF NOT EXISTS keel_sched_schedules (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    plugin TEXT,
    next_due DOUBLE PRECISION NOT NULL,
    last_fire DOUBLE PRECISION,
    last_status TEXT,
    last_error TEXT,
    last_finished DOUBLE PRECISION
)"""
INDEX = "CREATE INDEX IF NOT EXISTS keel_sched_jobs_due ON keel_sched_jobs (status, due_at)"
JOB_COLUMNS = (
    "id, key, name, payload, due_at, status, attempts, max_attempts, epoch, lease_owner, lease_until, "
    "schedule, plugin, created_at, started_at, finished_at, error"
)
CLAIMABLE = "((status = 'pending' AND due_at <= $1) OR (status = 'running' AND lease_until < $1))"


class Conn(Protocol):
    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]: ...
    async def execute(self, sql: str, *args: Any) -> int: ...


class Database(Protocol):
    skip_locked: str

    def describe(self) -> str: ...
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    def transaction(self) -> AbstractAsyncContextManager[Conn]: ...


# -- SQLite ---------------------------------------------------------------------------------------

_PARAM = re.compile(r"\$(\d+)")


def _sqlite_sql(sql: str) -> str:
    return _PARAM.sub(r"?\1", sql)


def _fetch(connection: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
    cursor = connection.execute(_sqlite_sql(sql), tuple(args))
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _execute(connection: sqlite3.Connection, sql: str, args: Sequence[Any]) -> int:
    return int(connection.execute(_sqlite_sql(sql), tuple(args)).rowcount)


def _begin(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")


def _commit(connection: sqlite3.Connection) -> None:
    connection.execute("COMMIT")


def _create_rest(connection: sqlite3.Connection) -> None:
    connection.execute(SCHEDULES)
    connection.execute(INDEX)


class _SqliteConn:
    def __init__(self, file: SqliteFile) -> None:
        self._file = file

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return await self._file.run(_fetch, sql, args)  # type: ignore[no-any-return]

    async def execute(self, sql: str, *args: Any) -> int:
        return await self._file.run(_execute, sql, args)  # type: ignore[no-any-return]


class SqliteDatabase:
    skip_locked = ""

    def __init__(self, path: str, *, busy_timeout: float) -> None:
        self._file = SqliteFile(
            path,
            schema=JOBS,
            busy_timeout=busy_timeout,
            thread_name="keel-scheduler-sqlite",
            label="the scheduler's tables",
            unavailable=SchedulerUnavailableError,
        )
        self._lock = asyncio.Lock()
        self._conn = _SqliteConn(self._file)
        self._tables = False  # created (the file may be unreachable at boot and reached later)

    def describe(self) -> str:
        return self._file.describe()

    async def open(self) -> None:
        await self._file.open()
        await self._file.run(_create_rest)
        self._tables = True

    async def close(self) -> None:
        await self._file.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        if not self._tables:
            await self.open()
        async with self._lock:
            # A cancellation that lands while BEGIN is queued or just done leaves it to run (or having
            # run) in the thread; the rollback queued behind it keeps the connection clean for the
            # next transaction, which would otherwise fail with "within a transaction".
            try:
                await self._file.run(_begin)
                yield self._conn
            except BaseException:
                await asyncio.shield(self._file.run(rollback_if_open))
                raise
            await self._file.run(_commit)


# -- PostgreSQL -----------------------------------------------------------------------------------

_ROWS = re.compile(r"(\d+)$")


class _PgConn:
    def __init__(self, connection: Any) -> None:
        self._c = connection

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._c.fetch(sql, *args)]

    async def execute(self, sql: str, *args: Any) -> int:
        status = await self._c.execute(sql, *args)
        found = _ROWS.search(status or "")
        return int(found.group(1)) if found else 0


class PostgresDatabase(PgBackend):
    skip_locked = " FOR UPDATE SKIP LOCKED"
    table = "keel_sched"
    schema = (JOBS, SCHEDULES, INDEX)
    owner = "the scheduler's PostgreSQL"
    unavailable = SchedulerUnavailableError

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        async with self._pool.connection() as connection, connection.transaction():
            yield _PgConn(connection)


# -- the operations -------------------------------------------------------------------------------


class Store:
    """Every read and write of the scheduler's tables, each one transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add_job(self, job: dict[str, Any]) -> tuple[str, bool]:
        """Insert ``job`` unless its key exists; ``(id of the job with that key, inserted?)``."""
        async with self.db.transaction() as c:
            inserted = await _insert_job(c, job)
            rows = await c.fetch("SELECT id FROM keel_sched_jobs WHERE key = $1", job["key"])
        return str(rows[0]["id"]), inserted

    async def upsert_schedule(
        self, name: str, spec: str, plugin: str | None, first_due: float
    ) -> dict[str, Any]:
        """Record the schedule; keep its ``next_due`` if its spec is unchanged, else use ``first_due``."""
        async with self.db.transaction() as c:
            # Each statement is safe against another process registering the same schedule at once:
            # the insert yields to an existing row, the update only changes a row whose spec differs.
            await c.execute(
                "INSERT INTO keel_sched_schedules (name, spec, plugin, next_due) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (name) DO NOTHING",
                name,
                spec,
                plugin,
                first_due,
            )
            await c.execute(
                "UPDATE keel_sched_schedules SET spec = $2, plugin = $3, next_due = $4 "
                "WHERE name = $1 AND spec <> $2",
                name,
                spec,
                plugin,
                first_due,
            )
            await c.execute(
                "UPDATE keel_sched_schedules SET plugin = $2 WHERE name = $1 AND plugin IS DISTINCT FROM $2",
                name,
                plugin,
            )
            rows = await c.fetch("SELECT * FROM keel_sched_schedules WHERE name = $1", name)
        return rows[0]

    async def due_schedules(self, names: Sequence[str], now: float) -> list[dict[str, Any]]:
        if not names:
            return []
        marks = ", ".join(f"${i + 2}" for i in range(len(names)))
        async with self.db.transaction() as c:
            return await c.fetch(
                f"SELECT name, next_due FROM keel_sched_schedules WHERE next_due <= $1 AND name IN ({marks})",
                now,
                *names,
            )

    async def fire(self, name: str, due: float, next_due: float, job: dict[str, Any] | None) -> bool:
        """Move the schedule from ``due`` to ``next_due`` and insert its tick ``job`` (``None``: a skipped
        tick), in one step; False when another process moved it first."""
        async with self.db.transaction() as c:
            moved = await c.execute(
                "UPDATE keel_sched_schedules SET next_due = $3, last_fire = CASE WHEN $4 THEN $2 "
                "ELSE last_fire END, last_status = CASE WHEN $4 THEN last_status ELSE 'skipped' END "
                "WHERE name = $1 AND next_due = $2",
                name,
                due,
                next_due,
                job is not None,
            )
            if moved and job is not None:
                await _insert_job(c, job)
        return bool(moved)

    async def claim(
        self, names: Sequence[str], now: float, holder: str, lease_until: float, limit: int
    ) -> list[dict[str, Any]]:
        """Take up to ``limit`` due jobs (or jobs whose lease ran out) whose handler is in ``names``."""
        if not names or limit <= 0:
            return []
        marks = ", ".join(f"${i + 3}" for i in range(len(names)))
        async with self.db.transaction() as c:
            candidates = await c.fetch(
                f"SELECT id, epoch FROM keel_sched_jobs WHERE {CLAIMABLE} AND name IN ({marks}) "
                f"ORDER BY due_at LIMIT $2{self.db.skip_locked}",
                now,
                limit,
                *names,
            )
            claimed = []
            for row in candidates:
                rows = await c.fetch(
                    "UPDATE keel_sched_jobs SET status = 'running', epoch = epoch + 1, "
                    "attempts = attempts + 1, "
                    "lease_owner = $3, lease_until = $4, started_at = $5 WHERE id = $1 AND epoch = $2 "
                    f"RETURNING {JOB_COLUMNS}",
                    row["id"],
                    row["epoch"],
                    holder,
                    lease_until,
                    now,
                )
                claimed.extend(rows)
        return claimed

    async def renew(self, job_id: str, epoch: int, lease_until: float) -> bool:
        async with self.db.transaction() as c:
            return bool(
                await c.execute(
                    "UPDATE keel_sched_jobs SET lease_until = $3 WHERE id = $1 AND epoch = $2 "
                    "AND status = 'running'",
                    job_id,
                    epoch,
                    lease_until,
                )
            )

    async def finish(
        self,
        job: dict[str, Any],
        *,
        status: str,
        error: str | None,
        now: float,
        retry_at: float | None = None,
    ) -> bool:
        """Record the outcome of the claim ``job`` holds (``status`` done/failed; ``retry_at`` puts it back
        to pending); False when the claim was fenced out (taken over or cancelled)."""
        async with self.db.transaction() as c:
            if retry_at is not None:
                changed = await c.execute(
                    "UPDATE keel_sched_jobs SET status = 'pending', due_at = $3, error = $4, "
                    "lease_owner = NULL, "
                    "lease_until = NULL WHERE id = $1 AND epoch = $2 AND status = 'running'",
                    job["id"],
                    job["epoch"],
                    retry_at,
                    error,
                )
            else:
                changed = await c.execute(
                    "UPDATE keel_sched_jobs SET status = $3, error = $4, finished_at = $5, "
                    "lease_owner = NULL, "
                    "lease_until = NULL WHERE id = $1 AND epoch = $2 AND status = 'running'",
                    job["id"],
                    job["epoch"],
                    status,
                    error,
                    now,
                )
            if changed and job.get("schedule"):
                await c.execute(
                    "UPDATE keel_sched_schedules SET last_status = $2, last_error = $3, last_finished = $4 "
                    "WHERE name = $1",
                    job["schedule"],
                    "retrying" if retry_at is not None else status,
                    error,
                    now,
                )
        return bool(changed)

    async def hand_back(self, job: dict[str, Any]) -> bool:
        """Give a claimed job back (a clean shutdown): pending at once, the attempt not counted."""
        async with self.db.transaction() as c:
            return bool(
                await c.execute(
                    "UPDATE keel_sched_jobs SET status = 'pending', attempts = attempts - 1, "
                    "lease_owner = NULL, "
                    "lease_until = NULL WHERE id = $1 AND epoch = $2 AND status = 'running'",
                    job["id"],
                    job["epoch"],
                )
            )

    async def jobs(
        self, *, status: str | None = None, name: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("status", status), ("name", name)):
            if value is not None:
                args.append(value)
                where.append(f"{column} = ${len(args)}")
        args.append(limit)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        async with self.db.transaction() as c:
            return await c.fetch(
                f"SELECT {JOB_COLUMNS} FROM keel_sched_jobs {clause}ORDER BY due_at DESC LIMIT ${len(args)}",
                *args,
            )

    async def job(self, job_id: str) -> dict[str, Any] | None:
        async with self.db.transaction() as c:
            rows = await c.fetch(f"SELECT {JOB_COLUMNS} FROM keel_sched_jobs WHERE id = $1", job_id)
        return rows[0] if rows else None

    async def cancel(self, job_id: str, now: float) -> bool:
        """Pending or running (its holder is fenced out) -> cancelled."""
        async with self.db.transaction() as c:
            return bool(
                await c.execute(
                    "UPDATE keel_sched_jobs SET status = 'cancelled', epoch = epoch + 1, finished_at = $2, "
                    "lease_owner = NULL, lease_until = NULL "
                    "WHERE id = $1 AND status IN ('pending', 'running')",
                    job_id,
                    now,
                )
            )

    async def rerun(self, job_id: str, now: float) -> bool:
        """A finished job (done, failed, cancelled) -> pending now, its attempts reset."""
        async with self.db.transaction() as c:
            return bool(
                await c.execute(
                    "UPDATE keel_sched_jobs SET status = 'pending', due_at = $2, attempts = 0, "
                    "epoch = epoch + 1, error = NULL, finished_at = NULL "
                    "WHERE id = $1 AND status IN ('done', 'failed', 'cancelled')",
                    job_id,
                    now,
                )
            )

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status."""
        async with self.db.transaction() as c:
            rows = await c.fetch("SELECT status, count(*) AS n FROM keel_sched_jobs GROUP BY status")
        return {str(r["status"]): int(r["n"]) for r in rows}

    async def schedules(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        async with self.db.transaction() as c:
            rows = await c.fetch("SELECT * FROM keel_sched_schedules ORDER BY name")
        return [r for r in rows if names is None or r["name"] in names]

    async def next_due(self, names: Sequence[str], schedule_names: Sequence[str]) -> float | None:
        """The earliest time anything this process can run becomes due (or a lease runs out)."""
        found: list[float] = []
        async with self.db.transaction() as c:
            if names:
                marks = ", ".join(f"${i + 1}" for i in range(len(names)))
                rows = await c.fetch(
                    "SELECT min(CASE WHEN status = 'pending' THEN due_at ELSE lease_until END) AS t "
                    f"FROM keel_sched_jobs WHERE status IN ('pending', 'running') AND name IN ({marks})",
                    *names,
                )
                found += [r["t"] for r in rows if r["t"] is not None]
            if schedule_names:
                marks = ", ".join(f"${i + 1}" for i in range(len(schedule_names)))
                rows = await c.fetch(
                    f"SELECT min(next_due) AS t FROM keel_sched_schedules WHERE name IN ({marks})",
                    *schedule_names,
                )
                found += [r["t"] for r in rows if r["t"] is not None]
        return min(found) if found else None


async def _insert_job(c: Conn, job: dict[str, Any]) -> bool:
    return bool(
        await c.execute(
            "INSERT INTO keel_sched_jobs (id, key, name, payload, due_at, status, attempts, max_attempts, "
            "epoch, "
            "schedule, plugin, created_at) VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, 0, $7, $8, $9) "
            "ON CONFLICT (key) DO NOTHING",
            job["id"],
            job["key"],
            job["name"],
            job["payload"],
            job["due_at"],
            job["max_attempts"],
            job.get("schedule"),
            job.get("plugin"),
            job["created_at"],
        )
    )
