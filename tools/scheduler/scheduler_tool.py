"""The ``scheduler`` tool: recurring schedules and durable one-shot jobs, fired once across processes.

The contract::

    scheduler.every(60, self.sweep)                            # every minute, first in a minute
    scheduler.cron("0 3 * * *", self.nightly, tz="Europe/Paris")
    scheduler.on_job("remind", self.remind)                    # the handler of jobs named "remind"
    job_id = await scheduler.at(when, "remind", {"user": 7}, key="remind:7:2026-12-01")
    job_id = await scheduler.after(3 * 86400, "remind", {"user": 7})
    await scheduler.jobs(status="failed"); await scheduler.cancel(job_id); await scheduler.rerun(job_id)
    await scheduler.schedules()                                # name, plugin, next fire, last result

- A handler is ``handler(job)`` (sync or async); ``job`` is a dict with ``id``, ``name``, ``payload``,
  ``due_at`` (epoch seconds), ``attempt``, ``epoch`` (the fencing token of this claim) and, for a
  schedule's tick, ``schedule``. It runs with the registering plugin as the current plugin.
- **Idempotency.** ``at``/``after`` with a ``key`` already used return that job's id and schedule
  nothing: the same key twice is one job (whatever state it is in). Without a key each call is a job.
- **Durability.** Jobs, and each schedule's next and last fire time, are rows in the scheduler's
  tables (:mod:`tools.scheduler.store`), so nothing is lost on a restart.
- **Catch-up policy** (``catch_up=`` on ``every``/``cron``): ``"once"`` (the default) fires a tick
  that came due while no process ran once when one comes back, however many were missed, then
  continues on the schedule; ``"skip"`` drops a tick found more than ``SCHEDULER_MISFIRE_GRACE_SECONDS``
  (60) late (the schedule's ``last_status`` says ``skipped``). A one-shot job due during the outage
  always runs once.
- **Exactly one process fires.** A tick is owned by the process whose compare-and-set moves the
  schedule's ``next_due`` on (the tick becomes a job in the same transaction); a job by the process
  that claims it, raising its ``epoch`` and taking a lease of ``SCHEDULER_LEASE_SECONDS`` (30),
  renewed while the handler runs. A process that dies holding a job loses it when the lease runs out
  and another takes it over (a new attempt); the outcome of a claim is recorded only under its own
  epoch, so a holder that was fenced out (taken over, or cancelled) cannot overwrite it, and its
  handler is cancelled at its next lease renewal. A clean shutdown hands its running jobs back at once.
- **Retries.** A handler that raises is retried after ``SCHEDULER_RETRY_BACKOFF_SECONDS`` (1),
  doubling, at most ``SCHEDULER_RETRY_MAX_SECONDS`` (300), until ``max_attempts`` (default
  ``SCHEDULER_MAX_ATTEMPTS``, 5) have run; then it is kept as ``failed`` with its error. A schedule's
  tick is one attempt unless ``retries=`` says otherwise (the next tick comes anyway).
- **Ownership.** Schedules and job handlers belong to the plugin that registered them (the kernel's
  ``current_plugin_var``): unloading it stops them in this process, and a reload swaps in the new
  version's registrations (``promote_owner``) without a gap. Jobs already stored stay and run
  again once some process has a handler for their name. A schedule's default name is
  ``<domain>.<Class>.<method>``, stable across reloads and restarts.
- **The dump.** ``kernel.capabilities.scheduler`` in ``/system/status`` lists every schedule of this
  process (plugin, next fire time, last fire and result), the jobs per status and the latest failed
  ones with their errors, refreshed by the serving loop at most once a second; ``status()`` is the
  same, now. ``/system/scheduler`` (the system domain) lists, cancels and re-runs jobs.
- **Clocks.** Due times and leases are this process's wall clock (``clock()``, which tests
  replace), so the processes of a cluster need clocks that agree to well within
  ``SCHEDULER_LEASE_SECONDS`` (NTP); the database's clock is not consulted.
- Nothing fires unless ``serve`` runs (the kernel runs it after boot) or ``tick()`` is called, which
  is one pass at ``clock()`` that waits for the jobs it started (tests replace ``clock``).

Configuration: ``SCHEDULER_URL`` (default ``DATABASE_URL``, else ``sqlite:///data/keel.db``;
``memory://`` is a private in-memory SQLite database), ``SCHEDULER_POLL_SECONDS`` (1: the longest
wait between passes; a process also wakes when the next thing it knows of comes due),
``SCHEDULER_CONCURRENCY`` (16 jobs at once per process), ``SCHEDULER_SHUTDOWN_GRACE_SECONDS`` (5),
``SCHEDULER_BUSY_TIMEOUT`` / ``SCHEDULER_CONNECT_TIMEOUT`` (5 / 5), ``SCHEDULER_POOL_MAX`` (5).

A database that cannot be reached at boot leaves the tool FAIL (not DEAD, so it still serves): each
pass tries again, and the first that succeeds marks it OK.

The scheduler opens its own connection rather than using the ``db`` tool (tools never import each
other), like the ``checkpoint`` tool; its tables are created on first use.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from core.base_tool import BaseTool
from core.context import current_plugin_var
from core.registry import ToolStatus
from core.reloader import base_owner, is_staging
from core.settings import env_float, env_int, env_str

from .errors import SchedulerUnavailableError
from .store import PostgresDatabase, SqliteDatabase, Store
from .timing import Cron, Every, Spec

log = logging.getLogger("keel.scheduler")

DEFAULT_DATABASE_URL = "sqlite:///data/keel.db"
TICK_PREFIX = "schedule:"
CATCH_UP = ("once", "skip")

Handler = Callable[[dict[str, Any]], Any]


@dataclass
class Registration:
    name: str  # the job name it handles (a schedule's is "schedule:<schedule name>")
    handler: Handler
    owner: str | None
    schedule: str | None = None
    spec: Spec | None = None
    catch_up: str = "once"
    retries: int = 0


@dataclass
class _Running:
    task: asyncio.Task[Any]
    owner: str | None
    job: dict[str, Any] = field(default_factory=dict)


class SchedulerTool(BaseTool):
    """Cron and interval schedules and durable one-shot jobs, each fired by one process of a cluster."""

    name = "scheduler"

    def __init__(self) -> None:
        self.clock: Callable[[], float] = time.time
        self._store: Store | None = None
        self._reason = "the scheduler is not set up"
        self._live: dict[str, Registration] = {}  # job name -> registration
        self._staged: dict[str, list[Registration]] = {}  # staging owner -> registrations waiting
        self._unsynced: set[str] = set()  # schedule names whose row is not written yet
        self._running: dict[str, _Running] = {}
        self._wake = asyncio.Event()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.poll = 1.0
        self.lease = 30.0
        self.concurrency = 16
        self.max_attempts = 5
        self.backoff = 1.0
        self.backoff_max = 300.0
        self.misfire_grace = 60.0
        self.shutdown_grace = 5.0
        self.fired = 0  # jobs this instance ran to an outcome
        self._capability: dict[str, Any] = {}
        self._status = ToolStatus.OK
        self._published_at = float("-inf")

    # -- lifecycle ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        url = scheduler_url()
        self.poll = env_float("SCHEDULER_POLL_SECONDS", 1.0) or 1.0
        self.lease = env_float("SCHEDULER_LEASE_SECONDS", 30.0) or 30.0
        self.concurrency = env_int("SCHEDULER_CONCURRENCY", 16, minimum=1)
        self.max_attempts = env_int("SCHEDULER_MAX_ATTEMPTS", 5, minimum=1)
        self.backoff = env_float("SCHEDULER_RETRY_BACKOFF_SECONDS", 1.0)
        self.backoff_max = env_float("SCHEDULER_RETRY_MAX_SECONDS", 300.0)
        self.misfire_grace = env_float("SCHEDULER_MISFIRE_GRACE_SECONDS", 60.0)
        self.shutdown_grace = env_float("SCHEDULER_SHUTDOWN_GRACE_SECONDS", 5.0)
        database = make_database(url, getattr(self, "project_root", Path.cwd()))
        shared = isinstance(database, PostgresDatabase)
        registry = getattr(self, "kernel_registry", None)
        self._capability = {"backend": url.split(":", 1)[0], "shared": shared}
        if registry is not None:
            registry.set_capability(self.name, dict(self._capability))
        self._store = Store(database)
        try:
            await database.open()
        except SchedulerUnavailableError as exc:
            # Unreachable now: the tool still serves (FAIL), and each pass tries again.
            log.error("scheduler: %s; retrying every pass", exc)
            self._set_status(ToolStatus.FAIL, f"{exc}; retrying")
            return
        self._set_status(ToolStatus.OK, database.describe())

    def _set_status(self, status: ToolStatus, message: str) -> None:
        self._status = status
        registry = getattr(self, "kernel_registry", None)
        if registry is not None:
            registry.update_tool_status(self.name, status, message)

    async def shutdown(self) -> None:
        await self._hand_back()
        store, self._store = self._store, None
        if store is not None:
            await store.db.close()
        self._reason = "the scheduler has been shut down"

    async def health_check(self) -> bool:
        try:
            await self._ready().schedules([])
        except SchedulerUnavailableError:
            return False
        return True

    async def serve(self, stop: asyncio.Event) -> None:
        """Fire due ticks and run due jobs until ``stop`` is set; then hand running jobs back."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                wait = self.poll
                try:
                    await self._pass(self.clock())
                    wait = await self._until_next()
                    await self._publish()
                    if self._status is not ToolStatus.OK and self._store is not None:
                        self._set_status(ToolStatus.OK, self._store.db.describe())
                except SchedulerUnavailableError as exc:  # an outage: the next pass tries again
                    log.warning("scheduler pass failed: %s", exc)
                    self._set_status(ToolStatus.FAIL, f"{exc}; retrying")
                except Exception:
                    log.exception("scheduler pass failed")
                self._wake.clear()
                waking = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({stopping, waking}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                waking.cancel()
        finally:
            stopping.cancel()
            await self._hand_back()

    # -- registering -------------------------------------------------------------------------------

    def every(
        self,
        interval: float | timedelta,
        handler: Handler,
        *,
        name: str | None = None,
        catch_up: str = "once",
        retries: int = 0,
    ) -> str:
        """Run ``handler`` every ``interval`` (seconds or a timedelta); returns the schedule's name."""
        seconds = interval.total_seconds() if isinstance(interval, timedelta) else float(interval)
        return self._add_schedule(Every(seconds), handler, name, catch_up, retries)

    def cron(
        self,
        expr: str,
        handler: Handler,
        *,
        tz: str = "UTC",
        name: str | None = None,
        catch_up: str = "once",
        retries: int = 0,
    ) -> str:
        """Run ``handler`` at the times of a cron expression in time zone ``tz``; returns its name."""
        return self._add_schedule(Cron(expr, tz), handler, name, catch_up, retries)

    def on_job(self, name: str, handler: Handler) -> None:
        """Make ``handler`` run the jobs named ``name`` (scheduled by ``at``/``after``, from any process)."""
        if name.startswith(TICK_PREFIX):
            raise ValueError(f"job names starting with {TICK_PREFIX!r} are the schedules' own")
        self._register(Registration(name, handler, current_plugin_var.get()))

    def _add_schedule(
        self, spec: Spec, handler: Handler, name: str | None, catch_up: str, retries: int
    ) -> str:
        if catch_up not in CATCH_UP:
            raise ValueError(f"catch_up must be one of {CATCH_UP}, got {catch_up!r}")
        owner = current_plugin_var.get()
        schedule = name or f"{base_owner(owner) or 'kernel'}.{getattr(handler, '__name__', 'handler')}"
        self._register(
            Registration(TICK_PREFIX + schedule, handler, owner, schedule, spec, catch_up, max(0, retries))
        )
        return schedule

    def _register(self, registration: Registration) -> None:
        if is_staging(registration.owner):
            assert registration.owner is not None
            self._staged.setdefault(registration.owner, []).append(registration)
            return
        self._live[registration.name] = registration
        if registration.schedule is not None:
            self._unsynced.add(registration.schedule)
        self._wake.set()

    def release_owner(self, owner: str) -> None:
        """Stop every schedule and job handler ``owner`` registered (in this process)."""
        self._staged.pop(owner, None)
        for name in [n for n, r in self._live.items() if r.owner == owner]:
            del self._live[name]

    def promote_owner(self, staged: str, owner: str) -> None:
        """Swap ``owner``'s registrations for those its new version made under ``staged``."""
        incoming = self._staged.pop(staged, [])
        self.release_owner(owner)
        for registration in incoming:
            registration.owner = owner
            self._register(registration)

    async def drain_owner(self, owner: str) -> None:
        """Return once the jobs ``owner``'s handlers are running have finished."""
        tasks = [r.task for r in self._running.values() if r.owner == owner]
        if tasks:
            await asyncio.wait(tasks)

    # -- one-shot jobs -----------------------------------------------------------------------------

    async def at(
        self,
        when: datetime | float,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        max_attempts: int | None = None,
    ) -> str:
        """Schedule the job ``name`` with ``payload`` (JSON) at ``when`` (an aware datetime or epoch
        seconds); the id of the job, or of the existing job with the same ``key``."""
        due = when.timestamp() if isinstance(when, datetime) else float(when)
        job_id = uuid.uuid4().hex
        found, inserted = await self._ready().add_job(
            {
                "id": job_id,
                "key": key if key is not None else job_id,
                "name": name,
                "payload": json.dumps(payload),
                "due_at": due,
                "max_attempts": max(1, max_attempts or self.max_attempts),
                "plugin": base_owner(current_plugin_var.get()),
                "created_at": self.clock(),
            }
        )
        if inserted:
            self._wake.set()
        return found

    async def after(
        self,
        delay: float | timedelta,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        max_attempts: int | None = None,
    ) -> str:
        """``at(now + delay, ...)``."""
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        return await self.at(self.clock() + seconds, name, payload, key=key, max_attempts=max_attempts)

    async def jobs(
        self, status: str | None = None, name: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Stored jobs, newest due first, optionally only those with ``status`` / ``name``."""
        rows = await self._ready().jobs(status=status, name=name, limit=limit)
        return [_public(row) for row in rows]

    async def job(self, job_id: str) -> dict[str, Any] | None:
        """One stored job, or ``None``."""
        row = await self._ready().job(job_id)
        return None if row is None else _public(row)

    async def cancel(self, job_id: str) -> bool:
        """Cancel a pending or running job (a running handler is stopped at its next lease renewal)."""
        cancelled = await self._ready().cancel(job_id, self.clock())
        if cancelled and (running := self._running.get(job_id)) is not None:
            running.task.cancel()
        return cancelled

    async def rerun(self, job_id: str) -> bool:
        """Run a finished (done, failed or cancelled) job again now, with fresh attempts."""
        done = await self._ready().rerun(job_id, self.clock())
        if done:
            self._wake.set()
        return done

    async def schedules(self) -> list[dict[str, Any]]:
        """Every schedule registered in this process: name, spec, plugin, next and last fire, last result."""
        await self._sync()
        local = {r.schedule: r for r in self._live.values() if r.schedule is not None}
        rows = await self._ready().schedules(sorted(local))
        return [
            {
                "name": row["name"],
                "spec": row["spec"],
                "plugin": base_owner(local[row["name"]].owner),
                "catch_up": local[row["name"]].catch_up,
                "next_fire": row["next_due"],
                "last_fire": row["last_fire"],
                "last_status": row["last_status"],
                "last_error": row["last_error"],
            }
            for row in rows
        ]

    async def status(self) -> dict[str, Any]:
        """What the system dump shows: schedules, job counts by status, the latest failed jobs."""
        store = self._ready()
        failed = await store.jobs(status="failed", limit=10)
        return {
            "holder": self.holder,
            "running_here": len(self._running),
            "schedules": await self.schedules(),
            "jobs": await store.counts(),
            "failed": [
                {k: row[k] for k in ("id", "name", "plugin", "attempts", "error", "finished_at")}
                for row in failed
            ],
        }

    async def _publish(self) -> None:
        """Refresh the dump's ``kernel.capabilities.scheduler`` (at most once a second)."""
        registry = getattr(self, "kernel_registry", None)
        if registry is None or time.monotonic() < self._published_at + 1.0:
            return
        self._published_at = time.monotonic()
        registry.set_capability(self.name, {**self._capability, **await self.status()})

    async def tick(self) -> int:
        """One pass at ``clock()``: fire due ticks, run due jobs, wait for them; how many ran."""
        started = await self._pass(self.clock())
        if started:
            await asyncio.gather(*started, return_exceptions=True)
        return len(started)

    # -- the passes --------------------------------------------------------------------------------

    def _ready(self) -> Store:
        if self._store is None:
            raise SchedulerUnavailableError(self._reason)
        return self._store

    async def _sync(self) -> None:
        store = self._ready()
        for schedule in sorted(self._unsynced):
            registration = self._live.get(TICK_PREFIX + schedule)
            if registration is not None and registration.spec is not None:
                spec = registration.spec
                await store.upsert_schedule(
                    schedule, spec.text, base_owner(registration.owner), spec.first(self.clock())
                )
            self._unsynced.discard(schedule)

    async def _pass(self, now: float) -> list[asyncio.Task[Any]]:
        store = self._ready()
        await self._sync()
        live = dict(self._live)
        schedules = {r.schedule: r for r in live.values() if r.schedule is not None}
        for row in await store.due_schedules(sorted(schedules), now):
            registration = schedules[row["name"]]
            assert registration.spec is not None
            due = float(row["next_due"])
            late = now - due
            job = None
            if registration.catch_up == "once" or late <= self.misfire_grace:
                job = {
                    "id": uuid.uuid4().hex,
                    "key": f"{registration.name}:{due!r}",
                    "name": registration.name,
                    "payload": "null",
                    "due_at": due,
                    "max_attempts": 1 + registration.retries,
                    "schedule": registration.schedule,
                    "plugin": base_owner(registration.owner),
                    "created_at": now,
                }
            await store.fire(row["name"], due, registration.spec.after(due, now), job)
        free = self.concurrency - len(self._running)
        claimed = await store.claim(sorted(live), now, self.holder, now + self.lease, free)
        return [self._start(row) for row in claimed]

    async def _until_next(self) -> float:
        if len(self._running) >= self.concurrency:
            return self.poll  # a finishing job wakes the loop
        names = sorted(self._live)
        schedules = sorted(r.schedule for r in self._live.values() if r.schedule is not None)
        upcoming = await self._ready().next_due(names, schedules)
        if upcoming is None:
            return self.poll
        return min(self.poll, max(0.0, upcoming - self.clock()))

    def _start(self, row: dict[str, Any]) -> asyncio.Task[Any]:
        registration = self._live.get(row["name"])
        context = contextvars.copy_context()
        context.run(current_plugin_var.set, registration.owner if registration else None)
        task = asyncio.get_running_loop().create_task(self._run(row, registration), context=context)
        self._running[row["id"]] = _Running(task, registration.owner if registration else None, row)
        task.add_done_callback(lambda done: self._finished(row, done))
        return task

    def _finished(self, row: dict[str, Any], task: asyncio.Task[Any]) -> None:
        self._running.pop(row["id"], None)
        self._wake.set()
        if not task.cancelled() and (error := task.exception()) is not None:
            # The handler's own failures are recorded by _run; this is the store failing under it.
            log.error(
                "job %s (%s): its outcome could not be recorded (%s: %s); it runs again once its lease ends",
                row["id"],
                row["name"],
                type(error).__name__,
                error,
            )

    async def _run(self, row: dict[str, Any], registration: Registration | None) -> None:
        store = self._ready()
        if registration is None:  # released between the claim and now: give it back
            await store.finish(row, status="pending", error=None, now=self.clock(), retry_at=self.clock())
            return
        job = {
            "id": row["id"],
            "key": row["key"],
            "name": row["name"],
            "payload": json.loads(row["payload"]),
            "due_at": row["due_at"],
            "attempt": row["attempts"],
            "epoch": row["epoch"],
            "schedule": row["schedule"],
        }
        work = asyncio.ensure_future(_call(registration.handler, job))
        renewing = asyncio.ensure_future(self._renew(row, work))
        try:
            await asyncio.wait({work})
        except asyncio.CancelledError:  # shutting down: the handler stops, the job is handed back
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            raise
        finally:
            renewing.cancel()
        now = self.clock()
        if work.cancelled():  # fenced out (cancelled, or taken over): nothing of ours to record
            return
        failure = work.exception()
        if failure is None:
            recorded = await store.finish(row, status="done", error=None, now=now)
        else:
            error = f"{type(failure).__name__}: {failure}"
            attempts = int(row["attempts"])
            if attempts < int(row["max_attempts"]):
                retry_at = now + min(self.backoff_max, self.backoff * 2 ** (attempts - 1))
                log.warning("job %s (%s) failed, retrying: %s", row["id"], row["name"], error)
                recorded = await store.finish(row, status="pending", error=error, now=now, retry_at=retry_at)
            else:
                log.error("job %s (%s) failed after %d attempts: %s", row["id"], row["name"], attempts, error)
                recorded = await store.finish(row, status="failed", error=error, now=now)
        if recorded:
            self.fired += 1
        else:
            log.warning(
                "job %s: its claim was fenced out; the outcome of epoch %s is dropped",
                row["id"],
                row["epoch"],
            )

    async def _renew(self, row: dict[str, Any], work: asyncio.Future[Any]) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                held = await self._ready().renew(row["id"], row["epoch"], self.clock() + self.lease)
            except SchedulerUnavailableError:
                continue  # the lease may still hold; try again
            if not held:
                log.warning("job %s: lease lost (taken over or cancelled); stopping its handler", row["id"])
                work.cancel()
                return

    async def _hand_back(self) -> None:
        """Let running jobs finish for ``SCHEDULER_SHUTDOWN_GRACE_SECONDS``, then give the rest back."""
        running = list(self._running.values())
        if not running:
            return
        _, pending = await asyncio.wait([r.task for r in running], timeout=self.shutdown_grace)
        for entry in running:
            if entry.task in pending:
                entry.task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        store = self._store
        if store is None:
            return
        for entry in running:
            if entry.task in pending:
                try:
                    await store.hand_back(entry.job)
                except SchedulerUnavailableError:
                    log.warning(
                        "job %s could not be handed back; it is taken over when its lease ends",
                        entry.job["id"],
                    )


async def _call(handler: Handler, job: dict[str, Any]) -> Any:
    result = handler(job)
    if inspect.isawaitable(result):
        result = await result
    return result


def _public(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["payload"] = json.loads(row["payload"])
    out["attempts"] = int(row["attempts"])
    out["epoch"] = int(row["epoch"])
    return out


def scheduler_url() -> str:
    """``SCHEDULER_URL``, else ``DATABASE_URL``, else the default SQLite file."""
    return env_str("SCHEDULER_URL") or env_str("DATABASE_URL") or DEFAULT_DATABASE_URL


def make_database(url: str, project_root: Path) -> SqliteDatabase | PostgresDatabase:
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    busy = env_float("SCHEDULER_BUSY_TIMEOUT", 5.0)
    if scheme == "memory":
        return SqliteDatabase(":memory:", busy_timeout=busy)
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError(f"{url!r}: write sqlite:///relative/path.db or sqlite:////absolute/path.db")
        raw = rest[1:]
        path = raw if raw == ":memory:" or Path(raw).is_absolute() else str(project_root / raw)
        return SqliteDatabase(path, busy_timeout=busy)
    if scheme in ("postgresql", "postgres"):
        return PostgresDatabase(
            url,
            pool_max=env_int("SCHEDULER_POOL_MAX", 5, minimum=1),
            connect_timeout=env_float("SCHEDULER_CONNECT_TIMEOUT", 5.0),
        )
    raise ValueError(
        f"scheduler URL scheme {scheme!r} is not supported; use sqlite://, postgresql:// or memory://"
    )
