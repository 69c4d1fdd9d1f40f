"""The bounded trace of recent events: who published what, who received it, how it went.

Each delivered event gets one :class:`TraceRecord` — id, parent id, name, emitter, timestamp, every
subscriber with its outcome and duration, and the total duration from publish until the last
subscriber finished. The newest ``EVENT_TRACE_BUFFER`` records are kept; older ones fall off.

A record is *complete* once every subscriber has finished (the bus fills the result slots and
calls :meth:`TraceLog.complete`); completion gives it a sequence number
and hands it (as a dict) to the listeners, which is what :meth:`TraceLog.stream` — and through it
the ``/system/events/stream`` endpoint — is built on. Payloads are not recorded: the trace says
what happened, not what was said, so it never holds on to (or leaks) payload data.

Per event the cost is one small object and a few list slots; dicts are only built when someone
reads the trace or listens to it.

The buffer is per process, also when several processes share a broker: each record is an event
as this process delivered it, and says so (``process``: ``{"pid", "host"}``, as in the dump's
``kernel.process``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from collections.abc import AsyncGenerator, Callable
from enum import StrEnum
from time import perf_counter
from typing import Any

from .events import Event

log = logging.getLogger("keel.event_bus")

TraceListener = Callable[[dict[str, Any]], None]
_HOST = socket.gethostname()


class Outcome(StrEnum):
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"


class TraceRecord:
    """The live record of one event; one result slot per subscriber, filled as each finishes.

    The bus's per-event path sets these fields itself rather than calling the class (a measurable
    part of an event's cost); a field added here must be set there too.
    """

    __slots__ = ("event", "finished", "pending", "results", "seq", "started", "subscribers")

    finished: float  # perf_counter() when the last subscriber was done; set with ``seq``

    def __init__(self, event: Event, subscribers: list[str]) -> None:
        self.event = event
        self.subscribers = subscribers  # shared with the bus's subscription table; never mutated
        self.results: list[tuple[Outcome, str | None, float] | None] = [None] * len(subscribers)
        self.pending = len(subscribers)
        self.started = perf_counter()
        self.seq = 0  # set, with ``finished``, when the last subscriber is done

    def as_dict(self) -> dict[str, Any]:
        event = self.event
        complete = self.pending == 0
        return {
            "id": event.id,
            "parent_id": event.parent_id,
            "name": event.name,
            "emitter": event.emitter,
            "timestamp": event.timestamp,
            "duration_ms": round((self.finished - self.started) * 1000, 3) if complete else None,
            "complete": complete,
            "seq": self.seq or None,
            "subscribers": [self._subscriber(i) for i in range(len(self.subscribers))],
            "process": {"pid": os.getpid(), "host": _HOST},
        }

    def _subscriber(self, index: int) -> dict[str, Any]:
        result = self.results[index]
        outcome, error, seconds = result if result is not None else (Outcome.RUNNING, None, None)
        return {
            "subscriber": self.subscribers[index],
            "outcome": str(outcome),
            "duration_ms": None if seconds is None else round(seconds * 1000, 3),
            "error": error,
        }


class TraceLog:
    """The newest ``size`` records, their listeners, and the causal tree over them."""

    def __init__(self, size: int) -> None:
        self._records: deque[TraceRecord] = deque(maxlen=size)
        self.keep = self._records.append
        """Add a new record (what :meth:`open` does, minus the call, for the bus's hot path)."""
        # Public because the bus's per-event path completes a record itself when nobody listens
        # (the same two steps as :meth:`complete`); change both together.
        self.listeners: tuple[TraceListener, ...] = ()
        self.seq = 0  # of the record completed last
        self.dropped_by_streams = 0

    @property
    def size(self) -> int:
        return self._records.maxlen or 0

    def open(self, event: Event, subscribers: list[str]) -> TraceRecord:
        """Start the record of an event about to be delivered to ``subscribers``."""
        record = TraceRecord(event, subscribers)
        self.keep(record)
        if not subscribers:
            self.complete(record)
        return record

    def complete(self, record: TraceRecord, now: float | None = None) -> None:
        """Every subscriber is done (``now``: the ``perf_counter()`` of that moment, if at hand)."""
        record.finished = perf_counter() if now is None else now
        self.seq += 1
        record.seq = self.seq
        if self.listeners:
            snapshot = record.as_dict()
            for listener in self.listeners:
                try:
                    listener(snapshot)
                except Exception:
                    log.exception("trace listener %r raised; the event is unaffected", listener)

    # -- listening -----------------------------------------------------------------------------

    def add_listener(self, listener: TraceListener) -> None:
        self.listeners = (*self.listeners, listener)

    def remove_listener(self, listener: TraceListener) -> None:
        self.listeners = tuple(x for x in self.listeners if x is not listener)

    async def stream(
        self, after: int | None = None, *, backlog: int = 1000
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Complete records as they complete; first the buffered ones completed after ``after``.

        ``after`` is a sequence number a consumer saw last (``None``: only new records). One from
        the future — a consumer that saw a previous process — replays the whole buffer. A consumer
        that falls more than ``backlog`` records behind loses the oldest ones (counted in
        ``dropped_by_streams``) rather than letting its queue grow without bound.
        """
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=backlog)

        def enqueue(record: dict[str, Any]) -> None:
            if queue.full():
                queue.get_nowait()
                self.dropped_by_streams += 1
            queue.put_nowait(record)

        self.add_listener(enqueue)  # before the replay, so nothing completing meanwhile is missed
        try:
            last = self.seq if after is None else after if after <= self.seq else 0
            for record in sorted((r for r in self._records if r.seq > last), key=lambda r: r.seq):
                last = record.seq
                yield record.as_dict()
            while True:
                item = await queue.get()
                if item["seq"] > last:
                    last = item["seq"]
                    yield item
        finally:
            self.remove_listener(enqueue)

    # -- reading ------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        return [record.as_dict() for record in self._records]

    def tree(self, root: str) -> dict[str, Any] | None:
        """``root`` and everything it caused, as nested ``children``; ``None`` if nothing is known.

        ``root`` may be an event id or an id that is only ever a parent (an HTTP request id): then
        the top node carries just that id and the events published while handling it.
        """
        records = list(self._records)
        children: dict[str | None, list[TraceRecord]] = {}
        found: TraceRecord | None = None
        for record in records:
            children.setdefault(record.event.parent_id, []).append(record)
            if record.event.id == root:
                found = record
        if found is None and root not in children:
            return None
        top: dict[str, Any] = found.as_dict() if found is not None else {"id": root, "parent_id": None}
        # Iterative, so a long causal chain cannot hit the recursion limit.
        pending: list[tuple[str, dict[str, Any]]] = [(root, top)]
        while pending:
            event_id, node = pending.pop()
            node["children"] = []
            for child in children.get(event_id, []):
                child_node = child.as_dict()
                node["children"].append(child_node)
                pending.append((child.event.id, child_node))
        return top
