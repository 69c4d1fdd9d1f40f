"""The runs of one process: starting them, reading them, following their events, cancelling them,
and resuming at boot the runs a previous process left in flight.

* ``start`` indexes the run, saves its first checkpoint and only then returns its id, so a run that
  was acknowledged is never lost; it then runs in a task of its own.
* ``view`` and ``follow`` serve a run that runs here from memory (its events as they happen) and any
  other run from its latest checkpoint; a run running in another process is followed by reading its
  checkpoint every ``poll`` seconds.
* ``cancel`` asks a run running here to stop at its next safe point, and if it has not stopped
  after ``cancel_grace`` seconds (a tool that does not return) cancels its task and records the
  cancellation. If the checkpoint store cannot be reached at that moment, the cancellation is saved
  as soon as it answers again (tried every ``poll`` seconds); until then the run stays leased to
  this process, so nobody resumes a run that was cancelled (a process that stops before then
  releases it, and the cancellation is lost). A run that is not running here is cancelled by saving
  a ``cancelled`` checkpoint on top of its latest one: if it is running in another process, that
  process's next save is refused and it stops.
* ``resume_in_flight`` (at boot; then every lease tick for takeovers, at most half of the
  orphans per tick, shuffled, so that the runs of a dead process spread over the survivors)
  claims and continues every indexed run in flight that no live process holds (see leases below),
  once its agent is declared (waiting up to ``resume_wait``
  seconds for the plugin that declares it); a run whose agent never appears is failed, saying so.
* ``close`` (at shutdown) cancels the tasks, leaves every run as its last checkpoint has it
  (``running``) and releases their leases, so the next process — or another one already running
  — continues them at once.

Work nobody awaits (resuming, keeping leases, forcing a cancellation) runs in background tasks
whose failure is logged with its traceback.

Several processes may share the database. Each run is leased to the process executing it
(:mod:`core.runs.index`): while it runs, the process renews the lease every third of
``lease`` seconds; a process that finds a lease expired (its holder was killed, or hung longer
than ``lease``) claims the run — one process wins the claim — and resumes it from its last
checkpoint. After a claim it only considers runs of agents it declares itself. A process that
finds it no longer holds the lease of a run it executes (another took it over) cancels that
run's task. And the checkpoints still arbitrate: a save based on a stale version is refused, so
two processes that both try to continue one run never both do.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from core.contracts.errors import ErrorClass, classify
from core.contracts.ports import Checkpoint, CheckpointStatus
from core.contracts.types import StreamEventKind
from core.errors import ConflictError, InvalidInputError, NotFoundError, ToolUnavailableError
from core.execution.cancellation import CancellationToken
from core.state.stores import CheckpointVersionConflict

from .catalog import AgentCatalog
from .execution import RunExecution, RunServices
from .feed import RunFeed, parse_event_id, position_after, sse_item
from .index import DEFAULT_LEASE_SECONDS, RunIndex
from .record import RunRecord, usage_json

log = logging.getLogger("keel.agents")

CANCELLED_BY_REQUEST = "cancelled through the API"
PURGE_EVERY = 60.0
_FINAL = str(StreamEventKind.FINAL)


@dataclass(frozen=True)
class RunSettings:
    resume_wait: float = 30.0
    cancel_grace: float = 5.0
    poll: float = 1.0
    lease: float = DEFAULT_LEASE_SECONDS
    tool_grace: float = 5.0
    """At shutdown, how long a tool call in flight may take to finish (and be checkpointed)."""
    retention: float = 30 * 24 * 3600.0
    """How long a finished run (its checkpoints and index row) is kept; 0 keeps it forever."""


@dataclass(eq=False)
class LiveRun:
    """A run executing in this process."""

    record: RunRecord
    feed: RunFeed
    token: CancellationToken = field(default_factory=CancellationToken)
    task: asyncio.Task[None] | None = None
    tool_idle: asyncio.Event = field(default_factory=lambda: _set(asyncio.Event()))
    """Clear while the run is inside a tool call (from its ``pending`` checkpoint to its result's)."""


class RunManager:
    def __init__(
        self,
        *,
        catalog: AgentCatalog,
        index: RunIndex,
        services: RunServices,
        settings: RunSettings | None = None,
    ) -> None:
        self.catalog = catalog
        self.index = index
        self.services = services
        self.settings = settings or RunSettings()
        self.live: dict[str, LiveRun] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._closing = asyncio.Event()
        self._next_purge = 0.0

    # -- starting ----------------------------------------------------------------------------------

    async def start(
        self,
        agent: str,
        task_input: str,
        *,
        max_cost_usd: str | None,
        max_calls: int | None,
        run_id: str | None = None,
        owner: str | None = None,
        tenant: str | None = None,
    ) -> RunRecord:
        """``run_id`` (default: a new one) lets a caller that must start a run once (a trigger) name
        it; a run id already indexed fails in ``index.add`` and nothing is started."""
        spec = self.catalog.get(agent)
        if spec is None:
            known = ", ".join(s.agent.name for s in self.catalog.specs()) or "none"
            raise NotFoundError(f"no agent named {agent!r} is declared (declared: {known})")
        record = RunRecord(
            run_id or uuid.uuid4().hex,
            agent,
            task_input,
            max_cost_usd=max_cost_usd,
            max_calls=max_calls,
            owner=owner,
            tenant=tenant,
        )
        await self.index.add(record.run_id, agent, record.created_at, owner=owner, tenant=tenant)
        try:
            await self.services.checkpoint.save(
                Checkpoint(record.run_id, 1, record.to_state(), record.created_at, CheckpointStatus.RUNNING)
            )
        except BaseException:
            await self._quietly(self.index.remove(record.run_id))
            raise
        record.version = 1
        self._launch(record, spec, resumed=False)
        return record

    def _launch(self, record: RunRecord, spec: Any, *, resumed: bool) -> LiveRun:
        live = LiveRun(record, RunFeed(record.events, record.epoch))
        self.live[record.run_id] = live
        live.task = asyncio.create_task(self._execute(live, spec, resumed), name=f"agent-run-{record.run_id}")
        return live

    async def _execute(self, live: LiveRun, spec: Any, resumed: bool) -> None:
        record = live.record
        try:
            await RunExecution(
                record,
                spec,
                self.services,
                live.feed,
                live.token,
                resumed=resumed,
                tool_idle=live.tool_idle,
                stopping=self._closing.is_set,
            ).run()
        except CheckpointVersionConflict as exc:
            log.warning(
                "agent run %s moved on elsewhere (%s); this process stops running it", record.run_id, exc
            )
            await self._quietly(self.index.release([record.run_id]))
        except asyncio.CancelledError:
            live.tool_idle.set()
            live.feed.close()
            raise
        except Exception:
            # The checkpoint could not be saved (its database is down): the run stays as its last
            # checkpoint has it, and its lease is given up so that it is resumed (here or
            # elsewhere) once the database is back.
            log.exception("agent run %s stopped: its state could not be saved", record.run_id)
            await self._quietly(self.index.release([record.run_id]))
        else:
            await self._quietly(self.index.set_status(record.run_id, str(record.status)))
        live.tool_idle.set()
        live.feed.close()
        if self.live.get(record.run_id) is live:
            del self.live[record.run_id]

    # -- resuming ----------------------------------------------------------------------------------

    async def resume_in_flight(self, *, any_agent: bool = True) -> int:
        """Claim and continue the runs in flight that nobody holds a live lease on; the number
        resumed. ``any_agent=False`` leaves runs of agents not declared here to other processes."""
        claimed: list[str] = []
        if any_agent:  # at boot: the runs of this host's killed processes need not wait for their lease
            for run_id, _agent, owner in await self.index.orphaned_here():
                if run_id not in self.live and await self.index.claim(run_id, from_owner=owner):
                    log.info("agent run %s: its process %s is gone; reclaiming it now", run_id, owner)
                    claimed.append(run_id)
        candidates = [
            (run_id, agent)
            for run_id, agent in await self.index.claimable()
            if run_id not in self.live and (any_agent or self.catalog.get(agent) is not None)
        ]
        limit = len(candidates)
        if not any_agent and limit > 1:
            # A takeover: every survivor sees the same orphans. Each claims at most half of what
            # it sees per tick, in its own random order, so they spread over the survivors
            # instead of piling on whichever ticks first; the rest go at the next ticks.
            random.shuffle(candidates)
            limit = (limit + 1) // 2
        for run_id, _agent in candidates:
            if self._closing.is_set() or len(claimed) >= limit:
                break
            if await self.index.claim(run_id):
                claimed.append(run_id)
        outcomes = await asyncio.gather(*(self._resume(run_id) for run_id in claimed))
        return sum(outcomes)

    async def _resume(self, run_id: str) -> bool:
        checkpoint = await self.services.checkpoint.latest(run_id)
        if checkpoint is None:
            log.error("agent run %s is indexed but has no checkpoint; marking it failed", run_id)
            await self.index.set_status(run_id, str(CheckpointStatus.FAILED))
            return False
        record = RunRecord.from_checkpoint(checkpoint)
        if record.terminal:
            await self.index.set_status(run_id, str(record.status))
            return False
        spec = self.catalog.get(record.agent) or await self.catalog.wait_for(
            record.agent, self.settings.resume_wait
        )
        if run_id in self.live or self._closing.is_set():
            await self._quietly(self.index.release([run_id]))
            return False
        if spec is None:
            message = f"agent {record.agent!r} is not declared in this service, so the run cannot continue"
            log.error("agent run %s: %s", run_id, message)
            try:
                await self._end_elsewhere(record, CheckpointStatus.FAILED, "error", message)
            except CheckpointVersionConflict:
                pass  # another process is running it after all
            return False
        log.info("resuming agent run %s (%s) from version %d", run_id, record.agent, record.version)
        self._launch(record, spec, resumed=True)
        return True

    # -- reading -----------------------------------------------------------------------------------

    async def record_of(self, run_id: str) -> RunRecord:
        live = self.live.get(run_id)
        if live is not None:
            return live.record
        checkpoint = await self.services.checkpoint.latest(run_id)
        if checkpoint is None:
            raise NotFoundError(f"no agent run {run_id!r}")
        return RunRecord.from_checkpoint(checkpoint)

    async def view(self, run_id: str) -> dict[str, Any]:
        record = await self.record_of(run_id)
        return record.view(await self.services.checkpoint.list_versions(run_id))

    async def follow(self, run_id: str, last_event_id: str | None) -> AsyncIterator[dict[str, Any]]:
        """The run's events after ``last_event_id`` as server-sent-event items, until its final one.

        Raises (before the stream starts) ``NotFoundError`` for an unknown run and
        ``InvalidInputError`` for a ``Last-Event-ID`` that is not an event id.
        """
        if last_event_id is not None:
            try:
                parse_event_id(last_event_id)
            except ValueError as exc:
                raise InvalidInputError(f"Last-Event-ID: {exc}") from None
        await self.record_of(run_id)
        return self._follow(run_id, last_event_id)

    async def _follow(self, run_id: str, last_id: str | None) -> AsyncIterator[dict[str, Any]]:
        final_sent = False
        while True:
            live = self.live.get(run_id)
            if live is not None:
                feed = live.feed
                position = position_after(feed.events, last_id)
                while True:
                    while position < len(feed.events):
                        event = feed.events[position]
                        position += 1
                        last_id = event["id"]
                        final_sent = final_sent or event["kind"] == _FINAL
                        yield sse_item(event)
                    if feed.closed:
                        break
                    await feed.wait_beyond(position)
            record = await self.record_of(run_id)
            for event in record.events[position_after(record.events, last_id) :]:
                last_id = event["id"]
                final_sent = final_sent or event["kind"] == _FINAL
                yield sse_item(event)
            if record.terminal and not final_sent:
                # Ended by another process (a cancellation) while this one still ran it: its
                # ``final`` may carry an id this follower has already passed (the events this
                # process published after its last checkpoint). Every follower gets it anyway.
                final = next((e for e in reversed(record.events) if e["kind"] == _FINAL), None)
                if final is not None:
                    yield sse_item(final)
                return
            if record.terminal or self._closing.is_set():
                return
            # Running in another process, waiting to be resumed, or being cancelled: look again.
            try:
                async with asyncio.timeout(self.settings.poll):
                    await self._closing.wait()
            except TimeoutError:
                pass

    # -- cancelling --------------------------------------------------------------------------------

    async def cancel(self, run_id: str) -> dict[str, Any]:
        live = self.live.get(run_id)
        if live is not None and not live.record.terminal:
            live.token.cancel(CANCELLED_BY_REQUEST)
            self._spawn(self._enforce_cancel(live), f"agent-run-{run_id}-cancel")
            return {"id": run_id, "status": "cancelling"}
        for _ in range(5):
            record = await self.record_of(run_id)
            if record.terminal:
                raise ConflictError(f"agent run {run_id} has already ended ({record.status})")
            try:
                await self._end_elsewhere(
                    record, CheckpointStatus.CANCELLED, "cancelled", CANCELLED_BY_REQUEST
                )
            except CheckpointVersionConflict:
                continue  # it moved on meanwhile: look again
            return {"id": run_id, "status": str(CheckpointStatus.CANCELLED)}
        raise ConflictError(f"agent run {run_id} keeps changing; try cancelling again")

    async def _enforce_cancel(self, live: LiveRun) -> None:
        task = live.task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=self.settings.cancel_grace)
        if done:
            return
        log.warning(
            "agent run %s did not stop within %gs; cancelling its task",
            live.record.run_id,
            self.settings.cancel_grace,
        )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        try:
            await self._save_forced_cancel(live.record)
        finally:
            if self.live.get(live.record.run_id) is live:
                del self.live[live.record.run_id]

    async def _save_forced_cancel(self, record: RunRecord) -> None:
        """Save the ``cancelled`` checkpoint of a run whose task was just stopped here. While the
        checkpoint store cannot be reached, try again every ``poll`` seconds: the run stays live here
        meanwhile, so its lease is kept and no process resumes a run that was cancelled."""
        failing = False
        while True:
            try:
                await self._end_elsewhere(
                    record, CheckpointStatus.CANCELLED, "cancelled", f"{CANCELLED_BY_REQUEST} (forced)"
                )
            except CheckpointVersionConflict:
                log.warning("agent run %s moved on elsewhere while it was being cancelled", record.run_id)
                return
            except Exception as exc:
                if not _transient(exc):
                    raise
                if not failing:
                    log.warning(
                        "agent run %s: its cancellation could not be saved; trying again every %gs",
                        record.run_id,
                        self.settings.poll,
                        exc_info=exc,
                    )
                failing = True
            else:
                if failing:
                    log.info("agent run %s: its cancellation is saved", record.run_id)
                return
            try:
                async with asyncio.timeout(self.settings.poll):
                    await self._closing.wait()
                return
            except TimeoutError:
                pass

    async def _end_elsewhere(
        self, record: RunRecord, status: CheckpointStatus, reason: str, error: str
    ) -> None:
        """End a run this process is not executing: a terminal checkpoint on top of its latest one.
        ``record`` is only changed once that checkpoint is saved (so a failed save can be retried)."""
        ended = replace(record, events=list(record.events), reason=reason, error=error, pending=None)
        ended.updated_at = time.time()
        RunFeed(ended.events, ended.epoch).publish(
            str(StreamEventKind.FINAL),
            {
                "status": str(status),
                "output": ended.output,
                "reason": reason,
                "error": error,
                "usage": usage_json(ended.usage),
                "cost_usd": ended.cost_usd,
            },
        )
        checkpoint = Checkpoint(record.run_id, record.version + 1, ended.to_state(), ended.updated_at, status)
        await self.services.checkpoint.save(checkpoint)
        record.reason, record.error, record.pending, record.updated_at = reason, error, None, ended.updated_at
        record.events[:] = ended.events
        record.version += 1
        record.status = status
        await self._quietly(self.index.set_status(record.run_id, str(status)))

    # -- lifecycle ---------------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        """A background task nobody awaits: its failure is logged here, or it would never be seen."""
        self._background.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("agents: background task %s failed", task.get_name(), exc_info=error)

    def start_resuming(self) -> None:
        """Resume the runs in flight in the background (boot does not wait for them), then keep
        this process's leases and take over the runs whose leases expire."""
        self._spawn(self._resume_logged(), "agents-resume")
        self._spawn(self._keep_leases(), "agents-leases")

    async def _keep_leases(self) -> None:
        interval = max(0.05, self.settings.lease / 3)
        failing = False
        while not self._closing.is_set():
            try:
                async with asyncio.timeout(interval):
                    await self._closing.wait()
                return
            except TimeoutError:
                pass
            try:
                await self._renew_leases()
                count = await self.resume_in_flight(any_agent=False)
            except Exception as exc:
                if not failing:
                    log.warning("agents: keeping leases failed (%s); trying again", exc)
                failing = True
                continue
            if failing:
                log.info("agents: keeping leases works again")
            failing = False
            if self.settings.retention > 0 and time.monotonic() >= self._next_purge:
                self._next_purge = time.monotonic() + PURGE_EVERY
                await self._quietly(self.purge_finished())
            if count:
                log.info("agents: took over %d run(s) whose process stopped renewing its lease", count)

    async def _renew_leases(self) -> None:
        """Renew the leases of the runs executing here; stop those whose lease another process took."""
        running = {run_id: live for run_id, live in self.live.items() if not live.record.terminal}
        if not running:
            return
        held = await self.index.renew(running)
        for run_id, live in running.items():
            if run_id in held or live.record.terminal or live.task is None or live.task.done():
                continue
            log.warning(
                "agent run %s: another process took its lease over; this process stops running it", run_id
            )
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
            if self.live.get(run_id) is live:
                del self.live[run_id]

    async def _resume_logged(self) -> None:
        try:
            count = await self.resume_in_flight()
        except Exception:
            log.exception("agents: resuming the runs in flight failed; they are resumed at the next boot")
            return
        if count:
            log.info("agents: resumed %d run(s) left in flight", count)

    async def close(self) -> None:
        """Stop every task of this process; runs keep their last checkpoint (``running``) and their
        leases are released, for another process (or the next boot) to continue them."""
        self._closing.set()
        await self._let_tool_calls_finish()
        tasks = [*self._background, *(live.task for live in self.live.values() if live.task is not None)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for live in self.live.values():
            live.feed.close()
        self.live.clear()
        await self._quietly(self.index.release())

    async def purge_finished(self) -> int:
        """Delete the runs that ended more than ``retention`` seconds ago (checkpoints first, then
        the index row, so a run is never indexed without its state); the number deleted."""
        if self.settings.retention <= 0:
            return 0
        ids = await self.index.finished_before(time.time() - self.settings.retention)
        for run_id in ids:
            await self.services.checkpoint.delete(run_id)
            await self.index.remove(run_id)
        if ids:
            log.info("agents: deleted %d finished run(s) past their retention", len(ids))
        return len(ids)

    async def _let_tool_calls_finish(self) -> None:
        """Give the runs inside a tool call up to ``tool_grace`` seconds to get its result
        checkpointed, so a rolling deploy does not cut a side-effecting call off (whose outcome
        the next process could then only call unknown). Leases are still renewed meanwhile."""
        busy = [
            live
            for live in self.live.values()
            if live.task is not None and not live.task.done() and not live.tool_idle.is_set()
        ]
        if not busy or self.settings.tool_grace <= 0:
            return
        grace = self.settings.tool_grace
        log.info("agents: waiting up to %gs for %d tool call(s) in flight", grace, len(busy))
        waits = [asyncio.ensure_future(live.tool_idle.wait()) for live in busy]
        _, late = await asyncio.wait(waits, timeout=grace)
        for wait in late:
            wait.cancel()
        if late:
            log.warning("agents: %d tool call(s) did not finish within the shutdown grace", len(late))

    async def _quietly(self, work: Any) -> None:
        try:
            await work
        except Exception:
            log.exception("agents: updating the run index failed (the checkpoint remains the authority)")


def _set(event: asyncio.Event) -> asyncio.Event:
    event.set()
    return event


def _transient(exc: Exception) -> bool:
    """An outage worth waiting out (the checkpoint store unreachable), not a refusal."""
    return isinstance(exc, ToolUnavailableError) or classify(exc) is ErrorClass.TRANSIENT
