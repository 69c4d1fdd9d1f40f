"""Agent runs that start by themselves: on an event, or on a schedule, each with its own budget.

A plugin that declares an agent (``catalog_for(container).declare(...)``) can also declare when it
runs without anyone asking::

    book = triggers_for(container)
    book.on_event("triage", "ticket.created", input="Triage ticket {payload[id]}: {payload[title]}",
                  max_calls=6, max_cost_usd="0.05")
    book.on_schedule("digest", cron="0 9 * * 1-5", tz="Europe/Paris", input="Write the daily digest")
    book.withdraw_owner()   # in on_shutdown: this plugin's triggers stop

``input`` is a string (formatted with ``payload``, ``event_id`` and ``event`` for an event trigger,
``due_at`` for a schedule) or a function of the same values returning the string. The budget
(``max_calls``, ``max_cost_usd``) applies to every run the trigger starts.

The runs are ordinary durable runs of the runs API (:mod:`core.runs.manager`): listed by
``GET /agents/runs``, followed and cancelled like the others. What makes them start once:

- **One run per event.** The triggers plugin (:mod:`domains.agents.plugins.agent_triggers`)
  subscribes each event trigger in a group of its own (``agents.trigger:<name>``; on a shared bus
  each group gets each event once across processes, possibly again after a crash) and turns the
  event into a scheduler job whose idempotency key is ``agents.trigger:<name>:<event id>``: a
  redelivered event is the same job.
- **One run per job.** A job (and a schedule's tick, which the scheduler fires in one process) starts
  the run under an id derived from its key (:func:`run_id_for`); a job re-run after its process died
  finds the run already indexed or checkpointed and starts nothing.

This module needs nothing but the standard library; the plugin composes it with the ``scheduler``
and ``event_bus`` tools.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.context import current_plugin_var
from core.reloader import base_owner

RUN_NAMESPACE = uuid.UUID("8f1f0a51-5f3e-4c55-9d47-6b7f0c8e2a11")

Input = str | Callable[..., str]


@dataclass(frozen=True)
class Trigger:
    """One way an agent starts by itself; ``event`` or one of ``cron`` / ``every`` is set."""

    name: str
    agent: str
    input: Input
    event: str | None = None
    cron: str | None = None
    every: float | None = None
    tz: str = "UTC"
    max_calls: int | None = None
    max_cost_usd: str | None = None
    owner: str | None = None

    def render(self, **values: Any) -> str:
        if callable(self.input):
            return str(self.input(**values))
        return self.input.format(**values)

    def view(self) -> dict[str, Any]:
        if self.event is not None:
            when = f"on event {self.event}"
        else:
            when = f"cron {self.cron} ({self.tz})" if self.cron else f"every {self.every}s"
        return {
            "name": self.name,
            "agent": self.agent,
            "when": when,
            "budget": {"max_calls": self.max_calls, "max_cost_usd": self.max_cost_usd},
            "declared_by": self.owner,
        }


@dataclass
class TriggerBook:
    """The triggers declared in one kernel, and who listens for new ones (the triggers plugin)."""

    triggers: dict[str, Trigger] = field(default_factory=dict)
    listeners: list[Callable[[Trigger], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_event(
        self,
        agent: str,
        event: str,
        *,
        input: Input,
        name: str | None = None,
        max_calls: int | None = None,
        max_cost_usd: str | None = None,
    ) -> Trigger:
        """Start a run of ``agent`` for every ``event`` published (once per event id)."""
        return self._add(
            Trigger(
                name or f"{agent}:{event}",
                agent,
                input,
                event=event,
                max_calls=max_calls,
                max_cost_usd=max_cost_usd,
                owner=current_plugin_var.get(),
            )
        )

    def on_schedule(
        self,
        agent: str,
        *,
        input: Input,
        cron: str | None = None,
        every: float | None = None,
        tz: str = "UTC",
        name: str | None = None,
        max_calls: int | None = None,
        max_cost_usd: str | None = None,
    ) -> Trigger:
        """Start a run of ``agent`` at each time of ``cron`` (in ``tz``) or ``every`` seconds."""
        if (cron is None) == (every is None):
            raise ValueError("give exactly one of cron= or every=")
        return self._add(
            Trigger(
                name or f"{agent}:{cron or every}",
                agent,
                input,
                cron=cron,
                every=every,
                tz=tz,
                max_calls=max_calls,
                max_cost_usd=max_cost_usd,
                owner=current_plugin_var.get(),
            )
        )

    def _add(self, trigger: Trigger) -> Trigger:
        with self._lock:
            existing = self.triggers.get(trigger.name)
            if existing is not None and base_owner(existing.owner) != base_owner(trigger.owner):
                raise ValueError(f"trigger {trigger.name!r} is already declared by {existing.owner}")
            self.triggers[trigger.name] = trigger
            listeners = list(self.listeners)
        for listener in listeners:
            listener(trigger)
        return trigger

    def withdraw_owner(self, owner: str | None = None) -> None:
        """Forget the triggers of ``owner`` (default: the current plugin); their events and ticks start
        nothing from then on."""
        owner = base_owner(owner if owner is not None else current_plugin_var.get())
        with self._lock:
            for name in [n for n, t in self.triggers.items() if base_owner(t.owner) == owner]:
                del self.triggers[name]

    def get(self, name: str) -> Trigger | None:
        return self.triggers.get(name)

    def listen(self, listener: Callable[[Trigger], None]) -> list[Trigger]:
        """Call ``listener`` for every trigger declared from now on; the ones declared so far."""
        with self._lock:
            self.listeners.append(listener)
            return list(self.triggers.values())

    def unlisten(self, listener: Callable[[Trigger], None]) -> None:
        with self._lock:
            if listener in self.listeners:
                self.listeners.remove(listener)


def run_id_for(key: str) -> str:
    """The run id a trigger job with idempotency ``key`` starts its run under (the same every time)."""
    return uuid.uuid5(RUN_NAMESPACE, key).hex


def thaw(value: Any) -> Any:
    """A plain JSON value from an event's deep-frozen payload (read-only mappings and tuples)."""
    if hasattr(value, "items"):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


_BOOKS: weakref.WeakKeyDictionary[Any, TriggerBook] = weakref.WeakKeyDictionary()
_MANAGERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def triggers_for(container: Any) -> TriggerBook:
    """The trigger book of the kernel that owns ``container``."""
    book = _BOOKS.get(container)
    if book is None:
        book = _BOOKS[container] = TriggerBook()
    return book


def publish_manager(container: Any, manager: Any) -> None:
    """The runs API offers its run manager to the triggers of its kernel."""
    _MANAGERS[container] = manager


def manager_for(container: Any) -> Any:
    """The run manager of the kernel that owns ``container``, or ``None`` before the runs API exists."""
    return _MANAGERS.get(container)
