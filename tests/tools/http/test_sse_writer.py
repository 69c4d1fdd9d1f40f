"""The per-client SSE writer: events coalesce into one send, memory stays bounded, nothing is lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from tools.http.sse_writer import CLOSED, ENDED, GONE, ClientWriter, pull


class Recorder:
    """An ASGI ``send`` that records bodies; ``gate`` cleared makes it a client that stopped reading."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()
        self.sent = asyncio.Event()

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        self.bodies.append(message["body"])
        self.sent.set()


class Watched(ClientWriter):
    """A writer that says when its buffer reached its limit."""

    full = asyncio.Event()

    def offer(self, chunk: bytes) -> None:
        super().offer(chunk)
        if not self.room.is_set():
            self.full.set()


async def test_queued_events_go_out_in_one_send() -> None:
    send = Recorder()
    writer = ClientWriter(send, heartbeat=60, flush=0.01)
    for chunk in (b"a\n\n", b"b\n\n", b"c\n\n"):
        writer.offer(chunk)
    writer.stop(ENDED)
    await writer.run()
    assert send.bodies == [b"a\n\nb\n\nc\n\n"]


async def test_a_client_gone_gets_nothing_more_and_closing_sends_what_is_buffered() -> None:
    gone, closed = Recorder(), Recorder()
    for send, reason in ((gone, GONE), (closed, CLOSED)):
        writer = ClientWriter(send, heartbeat=60, flush=0)
        writer.offer(b"x\n\n")
        writer.stop(reason)
        await writer.run()
    assert gone.bodies == []
    assert closed.bodies == [b"x\n\n"]


async def test_a_slow_client_holds_bounded_memory_and_loses_no_event() -> None:
    send = Recorder()
    writer = Watched(send, heartbeat=60, flush=0, limit=8)
    writer.full = asyncio.Event()
    events = [f"e{n}".encode() for n in range(40)]
    sizes: list[int] = []

    async def source() -> AsyncIterator[bytes]:
        for event in events:
            sizes.append(writer.size)
            yield event

    send.gate.clear()  # the client reads nothing for now
    puller = asyncio.create_task(pull(source(), writer, lambda item: item, lambda exc: b"error"))
    running = asyncio.create_task(writer.run())
    async with asyncio.timeout(5):
        await send.waiting.wait()
        await writer.full.wait()  # the puller filled the buffer up to its limit, and waits
    assert writer.size <= 8 + 3  # the limit plus at most one event
    send.gate.set()
    async with asyncio.timeout(5):
        await puller
        await running
    assert b"".join(send.bodies) == b"".join(events)
    assert max(sizes) <= 8 + 3
    assert writer.sends < len(events)  # coalesced, not one send per event


async def test_a_failing_iterator_ends_with_its_error_chunk_after_the_events() -> None:
    send = Recorder()
    writer = ClientWriter(send, heartbeat=60, flush=0)

    async def flaky() -> AsyncIterator[bytes]:
        yield b"first"
        raise RuntimeError("boom")

    await pull(flaky(), writer, lambda item: item, lambda exc: f"[{exc}]".encode())
    assert writer.stopped == ENDED
    await writer.run()
    assert b"".join(send.bodies) == b"first[boom]"


async def test_an_idle_writer_sends_heartbeats_until_stopped() -> None:
    send = Recorder()
    writer = ClientWriter(send, heartbeat=0.01, flush=0)
    running = asyncio.create_task(writer.run())
    async with asyncio.timeout(5):
        while len(send.bodies) < 2:
            send.sent.clear()
            await send.sent.wait()
    writer.stop(GONE)
    await running
    assert set(send.bodies) == {b": keep-alive\n\n"}


async def test_events_within_the_coalescing_window_wait_for_its_end_and_go_together() -> None:
    send = Recorder()
    writer = ClientWriter(send, heartbeat=60, flush=0.05)
    writer.offer(b"a\n\n")  # nothing sent yet: goes at once
    running = asyncio.create_task(writer.run())
    async with asyncio.timeout(5):
        await send.sent.wait()
    send.sent.clear()
    writer.offer(b"b\n\n")  # inside the window that send opened: held until it ends
    writer.offer(b"c\n\n")
    assert writer.held
    async with asyncio.timeout(5):
        await send.sent.wait()
    writer.stop(GONE)
    await running
    assert send.bodies == [b"a\n\n", b"b\n\nc\n\n"]
    assert not writer.held


async def test_closing_sends_what_is_held_at_once() -> None:
    send = Recorder()
    writer = ClientWriter(send, heartbeat=60, flush=60)
    writer.offer(b"a\n\n")
    running = asyncio.create_task(writer.run())
    async with asyncio.timeout(5):
        await send.sent.wait()
    writer.offer(b"b\n\n")  # held for a minute, unless the stream closes
    writer.stop(CLOSED)
    async with asyncio.timeout(5):
        await running
    assert send.bodies == [b"a\n\n", b"b\n\n"]
