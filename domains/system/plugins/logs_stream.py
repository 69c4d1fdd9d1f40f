"""``GET /system/logs/stream``: every log line of this process, live, as server-sent events.

Each line is one event whose ``id`` is an increasing integer and whose ``data`` is ``{"id", "level",
"message", "timestamp", "identity", "event_id", "trace_id", "span_id", "process"}``; ``event_id`` is
the request id or event id the line was logged under (the root of its event chain, or one of its
events; ``null`` outside any), so the dashboard links a line to its event chain; ``trace_id`` /
``span_id`` are the OpenTelemetry span active where the line was logged (hex, ``null`` when none),
so a line can be looked up in the tracing backend; ``process`` is ``{"pid", "host"}`` of this
process (as in the dump's ``kernel.process``), because the stream is per process: behind a load
balancer each Keel process streams its own lines. The last ``LOG_STREAM_BACKLOG`` lines (default
1000) are kept, so a client reconnecting with ``Last-Event-ID: N`` (browsers send it by themselves)
first receives the kept lines after N. ``?level=WARNING`` keeps lines at or above a level.
Admin-only once authentication is configured.

A slow client never slows the logger or the other clients: each client has its own queue of
``LOG_STREAM_CLIENT_QUEUE`` lines (default 1000). When its queue is full, new lines are dropped
for that client only, and at the point of the gap it receives ``event: dropped`` with data
``{"dropped": n}``; the same event opens a replay whose first lines had already left the backlog.
A ``Last-Event-ID`` higher than any id this process issued comes from before a restart: the
client then gets the whole backlog.

Log sinks run in whatever thread logged; lines from other threads are handed to the event loop
with ``call_soon_threadsafe``, so the queues are only ever touched on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any

from core import BasePlugin, InvalidInputError, current_event_id_var
from core.settings import env_int

DEFAULT_BACKLOG = 1000
DEFAULT_CLIENT_QUEUE = 1000


class Dropped:
    """A gap in one client's queue: ``count`` lines were dropped at this point."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count


class LogClient:
    """One connected client: its bounded queue, its level filter and a wake-up event.

    The queue holds runs of events (lists shared with the other clients that took the same
    lines, never changed) and gap markers; ``held`` counts its lines and markers against
    ``capacity``, and ``head`` is how far the first run was already read one event at a time.
    """

    def __init__(self, capacity: int, min_level: int) -> None:
        self.capacity = capacity
        self.min_level = min_level
        self.queue: deque[list[dict[str, Any]] | Dropped] = deque()
        self.held = 0
        self.head = 0
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until the next ``offer`` (or ``wake``): one plain future, cheaper than an Event."""
        waiter = self.waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self.waiter = None

    def offer(self, events: list[dict[str, Any]]) -> None:
        """Take a run of lines, as many as fit; the rest are counted at the gap."""
        room = self.capacity - self.held
        count = len(events)
        queue = self.queue
        if count <= room:
            queue.append(events)
            self.held += count
        else:
            if room > 0:
                queue.append(events[:room])
                self.held += room
            last = queue[-1] if queue else None
            if isinstance(last, Dropped):
                last.count += count - max(room, 0)
            else:
                queue.append(Dropped(count - max(room, 0)))  # the marker may exceed the capacity by one
                self.held += 1
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take_one(self) -> list[dict[str, Any]] | Dropped | None:
        """The next line (as a run of one) or gap, or ``None`` when the queue is empty."""
        queue = self.queue
        if not queue:
            return None
        first = queue[0]
        self.held -= 1
        if isinstance(first, Dropped):
            queue.popleft()
            return first
        event = first[self.head]
        self.head += 1
        if self.head == len(first):
            queue.popleft()
            self.head = 0
        return [event]

    def take_all(self) -> list[list[dict[str, Any]] | Dropped]:
        """Everything queued, in order, emptying the queue."""
        taken = list(self.queue)
        first = taken[0] if taken else None
        if self.head and isinstance(first, list):
            taken[0] = first[self.head :]
        self.queue.clear()
        self.held = 0
        self.head = 0
        return taken


class LogBroadcast:
    """The backlog and the connected clients; used on the event loop thread only.

    Lines published while the loop runs one step are handed to the clients together, once that
    step ends (or sooner, when a client reads): a run of lines costs each client one offer and
    one wake-up, not one per line, and every client at the same level shares the run's events.
    """

    def __init__(self, backlog: int, client_queue: int) -> None:
        self.backlog: deque[dict[str, Any]] = deque(maxlen=backlog)
        self.client_queue = client_queue
        self.clients: set[LogClient] = set()
        self.last_id = 0
        self.process = {"pid": os.getpid(), "host": socket.gethostname()}
        self.pending: list[dict[str, Any]] = []

    def publish(
        self,
        level: str,
        message: str,
        timestamp: str,
        identity: str | None,
        trace: Any = None,
        event_id: str | None = None,
    ) -> None:
        self.last_id += 1
        entry = {
            "id": self.last_id,
            "level": level,
            "levelno": _levelno(level),
            "message": message,
            "timestamp": timestamp,
            "identity": identity,
            "event_id": event_id,
            "trace_id": trace[0] if trace else None,
            "span_id": trace[1] if trace else None,
            "process": self.process,
        }
        self.backlog.append(entry)
        if not self.clients:
            return
        pending = self.pending
        pending.append(entry)
        if len(pending) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.fan_out)
            except RuntimeError:  # no loop running: hand the line over now
                self.fan_out()

    def fan_out(self) -> None:
        """Hand the pending lines to every client (one shared run per level filter)."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        runs: dict[int, list[dict[str, Any]]] = {}
        for client in self.clients:
            level = client.min_level
            run = runs.get(level)
            if run is None:
                run = runs[level] = [as_event(e) for e in pending if e["levelno"] >= level]
            if run:
                client.offer(run)

    def subscribe(
        self, last_event_id: int | None, min_level: int = 0
    ) -> tuple[LogClient, list[dict[str, Any]], int]:
        """A new client, the backlog lines it missed, and how many missed lines are gone."""
        self.fan_out()  # lines published before this client belong to the backlog it replays
        client = LogClient(self.client_queue, min_level)
        replay: list[dict[str, Any]] = []
        lost = 0
        if last_event_id is not None:
            after = last_event_id if last_event_id <= self.last_id else 0  # newer: from before a restart
            replay = [e for e in self.backlog if e["id"] > after and e["levelno"] >= min_level]
            oldest = self.backlog[0]["id"] if self.backlog else self.last_id + 1
            lost = max(0, oldest - after - 1)
        self.clients.add(client)
        return client, replay, lost

    def unsubscribe(self, client: LogClient) -> None:
        self.clients.discard(client)


def as_event(entry: dict[str, Any]) -> dict[str, Any]:
    """The line's event, built once and shared by every client (the SSE writer then encodes a
    shared event once for all of them); it must not be changed once built."""
    event = entry.get("_event")
    if event is None:
        data = {key: value for key, value in entry.items() if key not in ("levelno", "_event")}
        event = entry["_event"] = {"id": str(entry["id"]), "data": data}
    return event


def dropped_event(count: int) -> dict[str, Any]:
    return {"event": "dropped", "data": {"dropped": count}}


class LogStream:
    """The events of one client, subscribed from its first step until it is closed.

    As an async iterator it gives one event at a time; ``batches()`` gives the same events as the
    SSE writer takes them best (see ``tools/http/sse.py``): each run of lines as one list, the
    same object for every client that took the whole run, so it is encoded once for all of them.
    """

    def __init__(self, broadcast: LogBroadcast, last_event_id: int | None, min_level: int) -> None:
        self.broadcast = broadcast
        self.last_event_id = last_event_id
        self.min_level = min_level
        self.client: LogClient | None = None
        self.closed = False
        self.first: deque[dict[str, Any]] = deque()
        self.runs: AsyncGenerator[list[dict[str, Any]], None] | None = None

    def _subscribe(self) -> LogClient:
        if self.closed:
            raise StopAsyncIteration
        client = self.client
        if client is None:
            client, replay, lost = self.broadcast.subscribe(self.last_event_id, self.min_level)
            self.client = client
            if lost:
                self.first.append(dropped_event(lost))
            self.first.extend(as_event(entry) for entry in replay)
        return client

    def __aiter__(self) -> LogStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        client = self._subscribe()
        if self.first:
            return self.first.popleft()
        while True:
            self.broadcast.fan_out()
            item = client.take_one()
            if item is None:
                await client.wait()
                if self.closed:
                    raise StopAsyncIteration
            elif isinstance(item, Dropped):
                return dropped_event(item.count)
            else:
                return item[0]

    def batches(self) -> AsyncGenerator[list[dict[str, Any]], None]:
        """Runs of events, each as one list; a gap is a run of its one ``dropped`` event."""
        self.runs = self._runs()
        return self.runs

    async def _runs(self) -> AsyncGenerator[list[dict[str, Any]], None]:
        try:
            client = self._subscribe()
        except StopAsyncIteration:
            return
        if self.first:
            first, self.first = list(self.first), deque()
            yield first
        broadcast = self.broadcast
        while not self.closed:
            broadcast.fan_out()
            if not client.queue:
                await client.wait()
                continue
            for item in client.take_all():
                yield [dropped_event(item.count)] if isinstance(item, Dropped) else item

    def __del__(self) -> None:
        # Forgotten without aclose (as an async generator would be finalised): stop feeding it.
        if self.client is not None:
            self.broadcast.unsubscribe(self.client)

    async def aclose(self) -> None:
        self.closed = True
        if self.runs is not None:
            try:
                await self.runs.aclose()
            except RuntimeError:
                pass  # still running in its reader's task, which ends it when it sees ``closed``
        if self.client is not None:
            self.broadcast.unsubscribe(self.client)
            self.client.wake()


def client_events(broadcast: LogBroadcast, last_event_id: int | None, min_level: int = 0) -> LogStream:
    """The events of one client (see :class:`LogStream`)."""
    return LogStream(broadcast, last_event_id, min_level)


def _levelno(level: str) -> int:
    number = logging.getLevelName(level)
    return number if isinstance(number, int) else 0


def _invalid(field: str, message: str) -> InvalidInputError:
    return InvalidInputError(
        f"{field}: {message}", fields=[{"field": field, "location": "query", "message": message}]
    )


class SystemLogsStreamPlugin(BasePlugin):
    def __init__(self, http: Any, logger: Any) -> None:
        self.http = http
        self.logger = logger
        self.broadcast = LogBroadcast(
            env_int("LOG_STREAM_BACKLOG", DEFAULT_BACKLOG, minimum=1),
            env_int("LOG_STREAM_CLIENT_QUEUE", DEFAULT_CLIENT_QUEUE, minimum=1),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    async def on_boot(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.logger.add_sink(self.on_log)
        self.http.add_sse_endpoint("/system/logs/stream", self.stream, tags=["system"], auth="admin")

    async def on_shutdown(self) -> None:
        self.logger.remove_sink(self.on_log)

    def on_log(
        self, level: str, message: str, timestamp: str, identity: str | None, trace: Any = None
    ) -> None:
        """The log sink: publish on the loop, handing lines from other threads over to it."""
        if threading.get_ident() == self._loop_thread:
            self.broadcast.publish(level, message, timestamp, identity, trace, current_event_id_var.get())
        elif self._loop is not None:
            try:
                publish = self.broadcast.publish
                event_id = current_event_id_var.get()
                self._loop.call_soon_threadsafe(publish, level, message, timestamp, identity, trace, event_id)
            except RuntimeError:
                pass  # the loop is closed: the process is ending and no client is left to tell

    def stream(self, data: dict[str, Any], context: dict[str, Any]) -> LogStream:
        """Log lines as they are written; ``Last-Event-ID`` replays the missed ones."""
        last_event_id = _last_event_id(context.get("last_event_id"))
        min_level = _min_level(data.get("level"))
        return client_events(self.broadcast, last_event_id, min_level)


def _last_event_id(raw: object) -> int | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    raise _invalid("last_event_id", f"must be the id of a log line (a whole number), got {raw!r}")


def _min_level(raw: object) -> int:
    if raw is None:
        return 0
    level = logging.getLevelName(raw.upper()) if isinstance(raw, str) else None
    if not isinstance(level, int):
        raise _invalid("level", f"must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {raw!r}")
    return level
