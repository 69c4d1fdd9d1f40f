"""One event-stream client's writer: no task per event, one ``send()`` per flush.

A stream used to cost, for every event and client, a new task, a wait on four futures and one
``send()``; at 100 clients and 1,000 events/s that saturated a core. Here each client has two
long-lived tasks and nothing per event: the *puller* takes events from the plugin's iterator,
formats them and appends them to the client's buffer; the *writer* (the response's own task) sends
everything buffered in one ``send()``, then waits ``SSE_FLUSH_SECONDS`` (default 0.01) so the next
events coalesce before the next send. An event arriving while the writer is idle goes out at once.

Memory stays bounded for a slow client: once ``BUFFER_LIMIT`` bytes are waiting, the puller stops
taking events until the writer has sent them (the iterator's own queue, as the log stream's, then
drops and counts what does not fit, as before). Disconnection, the server shutting down and the
route being removed stop the writer promptly through callbacks (one watcher task each per client,
none per event).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.types import Send

BUFFER_LIMIT = 256 * 1024
HEARTBEAT = b": keep-alive\n\n"
GONE, ENDED, CLOSED = "gone", "ended", "closed"


class ClientWriter:
    """The buffer of formatted events for one client, and the loop that sends it."""

    def __init__(self, send: Send, heartbeat: float, flush: float, limit: int = BUFFER_LIMIT) -> None:
        self.send = send
        self.heartbeat = heartbeat
        self.flush = flush
        self.limit = limit
        self.buffer: list[bytes] = []
        self.size = 0
        self.sends = 0
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.stopped: str | None = None

    def offer(self, chunk: bytes) -> None:
        """Queue one formatted event; ``room`` clears once the buffer reaches its limit."""
        self.buffer.append(chunk)
        self.size += len(chunk)
        if self.size >= self.limit:
            self.room.clear()
        self.wake.set()

    def stop(self, reason: str) -> None:
        """End the writer: ``gone`` drops what is buffered, anything else sends it first."""
        if self.stopped is None:
            self.stopped = reason
        self.wake.set()
        self.room.set()

    async def run(self) -> None:
        """Send until stopped; a heartbeat comment after ``heartbeat`` seconds without a send."""
        while True:
            if not self.buffer and self.stopped is None:
                self.wake.clear()
                try:
                    async with asyncio.timeout(self.heartbeat):
                        await self.wake.wait()
                except TimeoutError:
                    await self._write(HEARTBEAT)
                    continue
            if self.stopped == GONE:
                return
            if self.buffer:
                chunks, self.buffer, self.size = self.buffer, [], 0
                self.room.set()
                await self._write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if self.stopped is not None:
                return
            if self.flush > 0:
                await asyncio.sleep(self.flush)  # the coalescing window: the next events gather

    async def _write(self, body: bytes) -> None:
        self.sends += 1
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
