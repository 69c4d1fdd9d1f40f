"""The events of a run as clients receive them: ids, the JSON each kind carries, and a live feed.

Every event has an id ``<epoch>-<n>``: ``n`` counts the run's events from 1 and ``epoch`` counts how
often the run was resumed in a new process. Events produced after the last checkpoint are lost
when a process dies, and the resumed run produces new ones in their place; because the new ones
carry a higher epoch, they sort after every id handed out before, so a client resuming with
``Last-Event-ID`` (even an id that was lost) receives everything it has not seen, in order. The
``resumed`` event says where that happened: text received since the previous checkpoint was from
an attempt that did not survive, and the step is being produced again.

:class:`RunFeed` is the in-process side: a run appends, readers wait for more, without a queue
per reader (each reader keeps its own position in the one list).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from core.contracts.types import StreamEvent, StreamEventKind

from .record import json_safe, tool_call_json, usage_json

RESUMED = "resumed"


def event_id(epoch: int, n: int) -> str:
    return f"{epoch}-{n}"


def parse_event_id(text: str) -> tuple[int, int]:
    """``(epoch, n)`` for an event id; ``ValueError`` for text that is not one."""
    epoch, dash, n = text.strip().partition("-")
    if not dash or not epoch.isdigit() or not n.isdigit():
        raise ValueError(f"{text!r} is not an event id (expected <epoch>-<n>, like 0-12)")
    return int(epoch), int(n)


def position_after(events: Sequence[dict[str, Any]], last_event_id: str | None) -> int:
    """The index of the first event after ``last_event_id`` (0 when there is none)."""
    if last_event_id is None:
        return 0
    seen = parse_event_id(last_event_id)
    for index, event in enumerate(events):
        if parse_event_id(event["id"]) > seen:
            return index
    return len(events)


def event_data(event: StreamEvent) -> dict[str, Any]:
    """What a stream event carries over the wire, by kind."""
    if event.kind == StreamEventKind.MESSAGE_DELTA:
        data: dict[str, Any] = {"text": event.text}
        if event.partial_output is not None:
            data["partial_output"] = json_safe(event.partial_output)
        return data
    if event.kind == StreamEventKind.TOOL_CALL and event.tool_call is not None:
        return {"tool_call": tool_call_json(event.tool_call)}
    if event.kind == StreamEventKind.TOOL_RESULT and event.tool_call is not None:
        return {"tool_call": tool_call_json(event.tool_call), "result": json_safe(event.tool_result)}
    data = {"text": event.text}
    if event.usage is not None:
        data["usage"] = usage_json(event.usage)
    return data


def sse_item(event: dict[str, Any]) -> dict[str, Any]:
    """A stored event as the http tool's server-sent-event item."""
    return {"id": event["id"], "event": event["kind"], "data": event["data"]}


class RunFeed:
    """The live list of a run's events, and a way to wait for the next one."""

    def __init__(self, events: list[dict[str, Any]], epoch: int) -> None:
        self.events = events
        self.epoch = epoch
        self.closed = False
        self._changed = asyncio.Event()

    def publish(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        event = {"id": event_id(self.epoch, len(self.events) + 1), "kind": kind, "data": data}
        self.events.append(event)
        self._wake()
        return event

    def close(self) -> None:
        """No more events will come (the run ended, or this process stopped running it)."""
        self.closed = True
        self._wake()

    async def wait_beyond(self, count: int) -> None:
        """Return once there are more than ``count`` events, or the feed is closed."""
        while len(self.events) <= count and not self.closed:
            await self._changed.wait()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
