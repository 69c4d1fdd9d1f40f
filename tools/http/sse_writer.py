"""One event-stream client's writer: no task per event, one ``send()`` per flush.

A stream used to cost, for every event and client, a new task, a wait on four futures and one
``send()``; at 100 clients and 1,000 events/s that saturated a core. Here each client has two
long-lived tasks and nothing per event: the *puller* takes events from the plugin's iterator,
formats them and appends them to the client's buffer; the *writer* (a task of its own, so a
wake-up does not resume the whole middleware stack the response runs in) sends everything buffered
in one ``send()``, and events arriving within ``SSE_FLUSH_SECONDS`` (default 0.01) of a send
coalesce until that window ends. An event arriving while the writer is idle goes out at once.

Memory stays bounded for a slow client: once ``BUFFER_LIMIT`` bytes are waiting, the puller stops
taking events until the writer has sent them (the iterator's own queue, as the log stream's, then
drops and counts what does not fit, as before). Disconnection, the server shutting down and the
route being removed stop the writer promptly through callbacks (one watcher task each per client,
none per event).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.types import Send

BUFFER_LIMIT = 256 * 1024
HEARTBEAT = b": keep-alive\n\n"
GONE, ENDED, CLOSED = "gone", "ended", "closed"


class Releases:
    """Ends the coalescing windows of one loop's writers: those ending in the same millisecond
    share one timer (a loop timer per client and send cost as much as the send's own Python)."""

    def __init__(self) -> None:
        self.due: dict[int, list[ClientWriter]] = {}  # no reference to the loop: it keys a weak map

    def add(self, writer: ClientWriter, when: float, loop: asyncio.AbstractEventLoop) -> None:
        slot = math.ceil(when * 1000)
        writers = self.due.get(slot)
        if writers is None:
            writers = self.due[slot] = []
            loop.call_at(slot / 1000, self._fire, slot)
        writers.append(writer)

    def _fire(self, slot: int) -> None:
        for writer in self.due.pop(slot, ()):
            writer.release()


_releases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Releases] = weakref.WeakKeyDictionary()


def releases_for(loop: asyncio.AbstractEventLoop) -> Releases:
    found = _releases.get(loop)
    if found is None:
        found = _releases[loop] = Releases()
    return found


class ClientWriter:
    """The buffer of formatted events for one client, and the loop that sends it.

    What a send costs besides the write itself is mostly wake-ups, so there are as few as can be:
    one step of the writer per send. A wait is one plain future that ``offer`` resolves; during
    the coalescing window after a send, ``offer`` instead books the window's end with the loop's
    :class:`Releases` (no sleep that ends in an empty buffer); the heartbeat is one timer per
    heartbeat period that looks at the time of the last send, not a timeout armed and cancelled
    around every wait.
    """

    def __init__(self, send: Send, heartbeat: float, flush: float, limit: int = BUFFER_LIMIT) -> None:
        self.send = send
        self.heartbeat = heartbeat
        self.flush = flush
        self.limit = limit
        self.buffer: list[bytes] = []
        self.size = 0
        self.sends = 0
        self.room = asyncio.Event()
        self.room.set()
        self.stopped: str | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.releases: Releases | None = None
        self.last_send = 0.0
        self.hold_until = 0.0  # the end of the coalescing window that follows a send
        self.held = False  # the window's end is booked
        self.beat_timer: asyncio.TimerHandle | None = None
        self.beat_due = False

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def release(self) -> None:
        """The coalescing window is over (said by :class:`Releases`; its timer may fire early)."""
        self.held = False
        self.hold_until = 0.0
        self._wake()

    def offer(self, chunk: bytes) -> None:
        """Queue one formatted event; ``room`` clears once the buffer reaches its limit."""
        self.buffer.append(chunk)
        self.size += len(chunk)
        if self.size >= self.limit:
            self.room.clear()
        waiter = self.waiter
        if waiter is None or waiter.done() or self.held:
            return
        loop = self.loop
        if loop is None or self.releases is None or loop.time() >= self.hold_until:
            waiter.set_result(None)
        else:
            self.held = True
            self.releases.add(self, self.hold_until, loop)

    def stop(self, reason: str) -> None:
        """End the writer: ``gone`` drops what is buffered, anything else sends it first."""
        if self.stopped is None:
            self.stopped = reason
        self._wake()
        self.room.set()

    async def run(self) -> None:
        """Send until stopped; a heartbeat comment after ``heartbeat`` seconds without a send."""
        loop = self.loop = asyncio.get_running_loop()
        self.releases = releases_for(loop)
        self.last_send = self.hold_until = loop.time()
        self.beat_timer = loop.call_at(self.last_send + self.heartbeat, self._beat, loop)
        try:
            await self._loop(loop, self.releases)
        finally:
            self.beat_timer.cancel()

    def _beat(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        due = self.last_send + self.heartbeat
        if now >= due - 0.001:  # timers may fire up to a millisecond early
            self.beat_due = True
            self._wake()
            due = now + self.heartbeat
        self.beat_timer = loop.call_at(due, self._beat, loop)

    async def _loop(self, loop: asyncio.AbstractEventLoop, releases: Releases) -> None:
        while True:
            if self.stopped == GONE:
                return
            if self.buffer and (self.stopped is not None or loop.time() >= self.hold_until):
                chunks, self.buffer, self.size = self.buffer, [], 0
                self.room.set()
                await self._write(chunks[0] if len(chunks) == 1 else b"".join(chunks), loop)
                if self.stopped is not None and not self.buffer:
                    return
                continue
            if self.stopped is not None and not self.buffer:
                return
            if self.beat_due and not self.buffer:
                await self._write(HEARTBEAT, loop)
                continue
            if self.buffer and not self.held:  # arrived during the window: held until its end
                self.held = True
                releases.add(self, self.hold_until, loop)
            waiter = self.waiter = loop.create_future()
            try:
                await waiter
            finally:
                self.waiter = None

    async def _write(self, body: bytes, loop: asyncio.AbstractEventLoop) -> None:
        self.sends += 1
        self.beat_due = False
        self.last_send = loop.time()
        self.hold_until = self.last_send + self.flush
        await self.send({"type": "http.response.body", "body": body, "more_body": True})


async def pull(
    iterator: AsyncIterator[Any],
    writer: ClientWriter,
    encode: Callable[[Any], bytes],
    on_error: Callable[[Exception], bytes],
) -> None:
    """Move the iterator's events (or its batches, see ``sse.py``) into ``writer``; its end (or
    failure) stops the writer."""
    batches = getattr(iterator, "batches", None)
    source: AsyncIterator[Any] = batches() if callable(batches) else iterator
    try:
        async for item in source:
            writer.offer(encode(item))
            if not writer.room.is_set():
                await writer.room.wait()
            if writer.stopped is not None:
                return
    except Exception as exc:
        writer.offer(on_error(exc))
    writer.stop(ENDED)
