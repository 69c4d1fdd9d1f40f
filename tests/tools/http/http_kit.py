"""Helpers for the http tool's tests: a set-up tool, an in-process client, a raw ASGI driver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tools.http.http_tool import HttpTool

WAIT = 5.0  # seconds any single expected message may take before the test fails
HTTP_ENV = (
    "HOST",
    "PORT",
    "SHUTDOWN_GRACE_SECONDS",
    "SSE_HEARTBEAT_SECONDS",
    "HTTP_ACCESS_LOG",
    "HTTP_MAX_BODY_BYTES",
    "HTTP_MAX_HEADER_BYTES",
    "HTTP_MAX_HEADERS",
    "HTTP_MAX_URL_BYTES",
    "HTTP_HEADER_TIMEOUT",
    "HTTP_BODY_TIMEOUT",
    "HTTP_KEEPALIVE_TIMEOUT",
    "HTTP_MAX_CONNECTIONS",
    "HTTP_MAX_CONNECTIONS_PER_CLIENT",
    "HTTP_MAX_STREAMS_PER_CLIENT",
    "HTTP_TRUSTED_PROXIES",
)


async def make_http(monkeypatch: pytest.MonkeyPatch, **env: str) -> HttpTool:
    """An http tool set up from a clean environment plus ``env``."""
    for key in HTTP_ENV:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    tool = HttpTool()
    await tool.setup()
    return tool


@asynccontextmanager
async def client(tool: HttpTool) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client calling the tool's full ASGI stack in-process (no server, no socket)."""
    transport = httpx.ASGITransport(app=tool.asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://keel.test") as http_client:
        yield http_client


@asynccontextmanager
async def running(http: HttpTool) -> AsyncIterator[tuple[str, asyncio.Event, asyncio.Task[None]]]:
    """The tool served by uvicorn for real: ``(base_url, stop, serving task)``; stopped on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(http.serve(stop))
    try:
        url = await asyncio.wait_for(http.wait_until_serving(), 10)
        yield url, stop, task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


class AsgiCall:
    """Drives one request through an ASGI app by hand: the test decides when the client leaves.

    httpx's ASGI transport waits for the whole response, which an event stream never finishes.
    """

    def __init__(
        self, app: Any, path: str, *, query: bytes = b"", headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        self.app = app
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
            "client": ("127.0.0.1", 50000),
            "server": ("keel.test", 80),
        }
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.client_gone = asyncio.Event()
        self._body_sent = False
        self.task: asyncio.Task[None] | None = None

    async def receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.client_gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        await self.sent.put(message)

    def start(self) -> AsgiCall:
        self.task = asyncio.create_task(self.app(self.scope, self.receive, self.send))
        return self

    async def message(self) -> dict[str, Any]:
        async with asyncio.timeout(WAIT):
            return await self.sent.get()

    async def start_message(self) -> dict[str, Any]:
        message = await self.message()
        assert message["type"] == "http.response.start"
        return message

    async def body_until(self, needle: bytes) -> bytes:
        """Body bytes received until ``needle`` has appeared (or the response ended)."""
        received = b""
        async with asyncio.timeout(WAIT):
            while needle not in received:
                message = await self.sent.get()
                received += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        return received

    async def finished(self) -> None:
        assert self.task is not None
        async with asyncio.timeout(WAIT):
            await self.task


def header(message: dict[str, Any], name: str) -> str | None:
    for key, value in message["headers"]:
        if key.decode().lower() == name:
            return str(value.decode())
    return None
