"""Triggered agent runs: the triggers of :mod:`core.runs.triggers`, wired to the
``scheduler`` and the ``event_bus``.

- An event trigger subscribes to its event in a group of its own (``agents.trigger:<name>``) and
  turns each event into the scheduler job ``agents.trigger`` keyed by trigger and event id, so a
  redelivered event (another process, a retry after a crash) is the same job.
- A schedule trigger is a scheduler schedule named ``agents.trigger:<name>``; the scheduler fires
  each tick in one process.
- The job (or tick) starts the run through the runs API's run manager under the id
  :func:`~core.runs.triggers.run_id_for` derives from its key; when a run with that id
  already exists nothing is started. A job that finds no run manager yet (the runs API is still
  booting) fails and is retried by the scheduler.

Subscriptions and schedules are made under the owner of the plugin that declared the trigger, so
unloading that plugin stops them (and ``withdraw_owner`` in its ``on_shutdown`` forgets them).
Without an ``event_bus`` event triggers are not armed (schedule triggers still are); without a
``scheduler`` no trigger is.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from typing import Any

from core import BasePlugin
from core.context import current_plugin_var
from core.runs import Trigger, manager_for, run_id_for, triggers_for
from core.runs.triggers import thaw

log = logging.getLogger("keel.agents.triggers")

JOB = "agents.trigger"


class AgentTriggersPlugin(BasePlugin):
    def __init__(self, container: Any, scheduler: Any = None, event_bus: Any = None) -> None:
        self.scheduler = scheduler
        self.event_bus = event_bus
        self.container = container
        self.book = triggers_for(container)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def on_boot(self) -> None:
        if self.scheduler is None:
            return  # no scheduler tool: nothing starts by itself
        self._loop = asyncio.get_running_loop()
        self.scheduler.on_job(JOB, self.run_job)
        arming = [self._arm(trigger) for trigger in self.book.listen(self._declared)]
        await asyncio.gather(*(task for task in arming if task is not None))  # subscribed before serving

    async def on_shutdown(self) -> None:
        self.book.unlisten(self._declared)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _declared(self, trigger: Trigger) -> None:
        """A trigger declared after this plugin booted (maybe from a plain on_boot's thread)."""
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._arm(trigger)
        else:
            loop.call_soon_threadsafe(self._arm, trigger)

    def _arm(self, trigger: Trigger) -> asyncio.Task[Any] | None:
        """Subscribe or schedule ``trigger``, as the plugin that declared it; the subscribing task."""
        context = contextvars.copy_context()
        context.run(current_plugin_var.set, trigger.owner)
        if trigger.event is not None:
            if self.event_bus is None:
                log.warning("trigger %s: no event_bus, so %s starts nothing", trigger.name, trigger.event)
                return None
            handler = self._event_handler(trigger.name)
            work = self.event_bus.subscribe(trigger.event, handler, group=f"{JOB}:{trigger.name}")
            task = asyncio.get_running_loop().create_task(work, context=context)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return task
        tick = self._tick_handler(trigger.name)
        if trigger.cron is not None:
            context.run(self.scheduler.cron, trigger.cron, tick, tz=trigger.tz, name=f"{JOB}:{trigger.name}")
        else:
            context.run(self.scheduler.every, trigger.every, tick, name=f"{JOB}:{trigger.name}")
        return None

    def _event_handler(self, name: str) -> Any:
        async def on_event(event: Any) -> None:
            trigger = self.book.get(name)
            if trigger is None:
                return  # withdrawn
            payload = thaw(event.payload)
            text = trigger.render(payload=payload, event_id=event.id, event=event.name)
            await self.scheduler.at(
                time.time(),
                JOB,
                {"trigger": name, "input": text, "event_id": event.id},
                key=f"{JOB}:{name}:{event.id}",
            )

        on_event.__name__ = f"on_event_{name}"
        return on_event

    def _tick_handler(self, name: str) -> Any:
        async def on_tick(job: dict[str, Any]) -> None:
            trigger = self.book.get(name)
            if trigger is not None:
                await self._start(trigger, job["key"], trigger.render(due_at=job["due_at"]))

        on_tick.__name__ = f"on_tick_{name}"
        return on_tick

    async def run_job(self, job: dict[str, Any]) -> None:
        """The scheduler job of one event: start its run (once)."""
        payload = job["payload"]
        trigger = self.book.get(payload["trigger"])
        if trigger is None:
            log.info(
                "trigger %s was withdrawn; event %s starts nothing", payload["trigger"], payload["event_id"]
            )
            return
        await self._start(trigger, job["key"], payload["input"])

    async def _start(self, trigger: Trigger, key: str, text: str) -> str:
        manager = manager_for(self.container)
        if manager is None:
            raise RuntimeError("the agent runs API has not booted yet; the job is retried")
        run_id = run_id_for(key)
        checkpoints = manager.services.checkpoint
        if await checkpoints.latest(run_id) is not None:
            return run_id  # started before (this job ran again after its process died)
        try:
            await manager.start(
                trigger.agent,
                text,
                max_cost_usd=trigger.max_cost_usd,
                max_calls=trigger.max_calls,
                run_id=run_id,
            )
        except Exception:
            if await checkpoints.latest(run_id) is not None:
                return run_id  # another holder of this job started it meanwhile
            raise
        log.info("trigger %s started run %s of %s", trigger.name, run_id, trigger.agent)
        return run_id
