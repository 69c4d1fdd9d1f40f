"""The event bus's trace over HTTP: the causal tree of one root, and a live stream of events.

- ``GET /system/events/tree?root=<id>`` answers the record of ``root`` with everything it caused
  nested under ``children``, depth first. ``root`` is an event id or an ``X-Request-ID``: events
  published while a request is handled have the request id as their parent, so the tree of a
  request id is everything that request set off (its top node then carries only the id). A root
  the trace buffer knows nothing about (never seen, or already evicted) is a 404.
- ``GET /system/events/stream`` sends each trace record as a server-sent event named ``trace``
  once every subscriber of the event has finished; the event ``id`` is the record's sequence
  number, so a client reconnecting with ``Last-Event-ID`` first gets the records it missed that are
  still buffered (an id from before a restart replays the whole buffer).

Both are admin-only once authentication is configured. Without an ``event_bus`` tool the plugin
registers nothing and stays healthy: there is simply no trace to show.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from pydantic import BaseModel, Field

from core import BasePlugin, InvalidInputError, NotFoundError


class TreeQuery(BaseModel):
    root: str = Field(min_length=1, pattern=r"\S", description="an event id or an X-Request-ID")


class EventTracePlugin(BasePlugin):
    def __init__(self, http: Any, event_bus: Any = None) -> None:
        self.http = http
        self.event_bus = event_bus

    async def on_boot(self) -> None:
        if self.event_bus is None:
            return
        self.http.add_endpoint(
            "/system/events/tree", "GET", self.tree, tags=["system"], auth="admin", query_model=TreeQuery
        )
        self.http.add_sse_endpoint("/system/events/stream", self.stream, tags=["system"], auth="admin")

    async def tree(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The causal tree under ``?root=`` (an event id or a request id)."""
        root = data.get("root")
        if not isinstance(root, str) or not root.strip():
            raise _invalid("root", "give the id of an event or of a request (X-Request-ID)")
        tree: dict[str, Any] | None = self.event_bus.trace_tree(root.strip())
        if tree is None:
            raise NotFoundError(
                f"no event in the trace buffer is, or descends from, {root!r} "
                "(it may never have been seen, or already be evicted: see EVENT_TRACE_BUFFER)"
            )
        return tree

    async def stream(
        self, data: dict[str, Any], context: dict[str, Any]
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Trace records as their events complete; ``Last-Event-ID`` replays the missed ones."""
        after = _last_event_id(context.get("last_event_id"))
        async for record in self.event_bus.trace_stream(after):
            yield {"event": "trace", "id": str(record["seq"]), "data": record}


def _last_event_id(raw: object) -> int | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    raise _invalid("last_event_id", f"must be the sequence number of a trace record, got {raw!r}")


def _invalid(field: str, message: str) -> InvalidInputError:
    return InvalidInputError(
        f"{field}: {message}", fields=[{"field": field, "location": "query", "message": message}]
    )
