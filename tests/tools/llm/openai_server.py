"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

It speaks the real wire format over a real loopback socket (HTTP/1.1, keep-alive, chunked
transfer encoding): ``POST /v1/chat/completions`` with ``"stream": true`` is answered with
``text/event-stream`` chunks ``data: {...}``, the usage chunk (empty ``choices``) when the request
asked for it, and ``data: [DONE]``. Each request is answered by the next queued :class:`Reply`, or
by ``responder(request_body)`` when the queue is empty, so a test can script failures (a status, a
malformed chunk, a disconnect half-way) as easily as answers. Every request is recorded in
``requests`` (its path, headers and JSON body).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Reply:
    """How to answer one request.

    ``events`` are sent as ``data:`` events in order: a dict as JSON, a str as the raw payload, bytes
    verbatim (for framing tests). ``done`` appends ``data: [DONE]``. ``disconnect_after`` drops the
    connection after that many events (no terminating chunk). ``status`` other than 200 answers with
    ``body`` (JSON) and ``headers`` instead of a stream. ``gate`` (an event) is awaited before the
    event at index ``gate_at``.
    """

    events: Sequence[Any] = ()
    done: bool = True
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    disconnect_after: int | None = None
    delay: float = 0.0
    gate: asyncio.Event | None = None
    gate_at: int = 0


def chunk(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    model: str = "test-model",
    role: str | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(
    prompt: int, completion: int, *, cached: int = 0, model: str = "test-model"
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [],
        "usage": usage,
    }


def text_reply(
    text: str, *, pieces: int = 3, usage: tuple[int, int] = (12, 7), model: str = "test-model"
) -> Reply:
    """A streamed text answer in ``pieces`` parts, a stop chunk, and a usage chunk."""
    size = max(1, -(-len(text) // pieces))
    parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    events: list[Any] = [chunk(role="assistant", content="", model=model)]
    events += [chunk(content=part, model=model) for part in parts]
    events.append(chunk(finish_reason="stop", model=model))
    events.append(usage_chunk(*usage, model=model))
    return Reply(events)


def tool_call_reply(
    calls: Sequence[tuple[str, str, dict[str, Any]]],
    *,
    fragment: int = 4,
    usage: tuple[int, int] = (20, 9),
    model: str = "test-model",
) -> Reply:
    """Tool calls streamed OpenAI's way: id and name first, then the arguments in ``fragment``-char pieces."""
    events: list[Any] = [chunk(role="assistant", model=model)]
    for index, (call_id, name, arguments) in enumerate(calls):
        head = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        events.append(chunk(tool_calls=[head], model=model))
        text = json.dumps(arguments)
        for start in range(0, len(text), fragment):
            piece = {"index": index, "function": {"arguments": text[start : start + fragment]}}
            events.append(chunk(tool_calls=[piece], model=model))
    events.append(chunk(finish_reason="tool_calls", model=model))
    events.append(usage_chunk(*usage, model=model))
    return Reply(events)


class OpenAIServer:
    """``async with OpenAIServer(responder) as server:``, then ``LLM_BASE_URL=server.base_url``."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.responder = responder or (lambda body: text_reply("hello from the test server"))
        self.queue: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        """The chat requests; anything else lands in ``probes``."""
        self.probes: list[dict[str, Any]] = []
        self.base_url = ""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def enqueue(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    async def __aenter__(self) -> OpenAIServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                keep_open = await self._answer(request, writer)
                if not keep_open:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        if request["path"] != CHAT_PATH or request["method"] != "POST":
            self.probes.append(request)  # the health check's GET /v1/models, say
            await _plain(writer, 404, {"error": {"message": f"no route {request['path']}"}}, {})
            return True
        self.requests.append(request)
        reply = self.queue.pop(0) if self.queue else self.responder(request["json"])
        if reply.status != 200:
            await _plain(writer, reply.status, reply.body, reply.headers)
            return True
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            "transfer-encoding: chunked\r\n\r\n"
        )
        writer.write(head.encode())
        wants_usage = bool((request["json"].get("stream_options") or {}).get("include_usage"))
        for index, event in enumerate(reply.events):
            if reply.disconnect_after is not None and index >= reply.disconnect_after:
                await writer.drain()
                writer.transport.abort()
                return False
            if reply.gate is not None and index == reply.gate_at:
                await writer.drain()
                await reply.gate.wait()
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if isinstance(event, dict) and "usage" in event and not event.get("choices") and not wants_usage:
                continue
            _write_chunk(writer, _frame(event))
            await writer.drain()
        if reply.disconnect_after is not None and reply.disconnect_after >= len(reply.events):
            await writer.drain()
            writer.transport.abort()
            return False
        if reply.done:
            _write_chunk(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _frame(event: Any) -> bytes:
    if isinstance(event, bytes):
        return event
    payload = event if isinstance(event, str) else json.dumps(event)
    return f"data: {payload}\n\n".encode()


def _write_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


async def _plain(writer: asyncio.StreamWriter, status: int, body: Any, headers: dict[str, str]) -> None:
    payload = json.dumps(body).encode() if body is not None else b""
    lines = [f"HTTP/1.1 {status} Test\r\n", "content-type: application/json\r\n"]
    lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
    lines.append(f"content-length: {len(payload)}\r\n\r\n")
    writer.write("".join(lines).encode() + payload)
    await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    parsed = json.loads(body) if body else {}
    return {"method": method, "path": path, "headers": headers, "json": parsed}
