"""Telemetry with the http tool on a served kernel: each request is a server span, and the tool calls
its handler makes are children in the same trace — for async and sync handlers, and failures."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from core import Kernel
from tests.kit import make_root, serving, write

GREETER_TOOL = """
    from core import BaseTool

    class Greeter(BaseTool):
        name = "greeter"

        def greet(self, who):
            return f"hello {who}"

        async def agreet(self, who):
            return f"hello {who}"

        def fail(self):
            raise ValueError("no greeting today")
"""

ENDPOINTS_PLUGIN = """
    from core import BasePlugin

    class Greetings(BasePlugin):
        def __init__(self, http, greeter):
            self.http = http
            self.greeter = greeter

        def on_boot(self):
            self.http.add_endpoint("/greet", "GET", self.greet)
            self.http.add_endpoint("/greet-sync", "GET", self.greet_sync)
            self.http.add_endpoint("/broken", "GET", self.broken)

        async def greet(self, data, context):
            return {"a": await self.greeter.agreet("async"), "b": self.greeter.greet("sync")}

        def greet_sync(self, data, context):
            return {"a": self.greeter.greet("from a thread")}

        async def broken(self, data, context):
            return self.greeter.fail()
"""


@pytest.fixture
async def service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Kernel, httpx.AsyncClient]]:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_ENABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "memory")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "memory")
    root = make_root(tmp_path, tools=("http", "telemetry"))
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    write(root, "domains/demo/plugins/greetings.py", ENDPOINTS_PLUGIN)
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        yield kernel, client


def finished(kernel: Kernel) -> list[Any]:
    return list(kernel.container.get("telemetry").memory_exporter.get_finished_spans())


def ancestors(span: Any, by_id: dict[int, Any]) -> list[Any]:
    chain = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        chain.append(span)
    return chain


def request_trace(kernel: Kernel, path: str) -> tuple[Any, list[Any]]:
    """The server span of the request to ``path`` and the tool-call spans under it."""
    spans = finished(kernel)
    servers = [s for s in spans if s.kind is SpanKind.SERVER and s.name.split()[-1] == path]
    assert len(servers) == 1, [(s.name, dict(s.attributes)) for s in spans]
    server = servers[0]
    by_id = {s.context.span_id: s for s in spans}
    calls = [s for s in spans if "keel.tool" in s.attributes and server in ancestors(s, by_id)]
    return server, calls


async def test_tool_calls_in_an_async_handler_are_children_of_the_request(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = service
    response = await client.get("/greet")
    assert response.json() == {"a": "hello async", "b": "hello sync"}
    server, calls = request_trace(kernel, "/greet")
    assert sorted(c.name for c in calls) == ["greeter.agreet", "greeter.greet"]
    assert {c.context.trace_id for c in calls} == {server.context.trace_id}
    assert (
        server.attributes.get("http.response.status_code", server.attributes.get("http.status_code")) == 200
    )


async def test_tool_calls_in_a_sync_handler_running_in_a_thread_are_children_too(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = service
    assert (await client.get("/greet-sync")).status_code == 200
    _, calls = request_trace(kernel, "/greet-sync")
    assert [c.name for c in calls] == ["greeter.greet"]


async def test_a_failing_tool_call_marks_its_span_and_the_request_fails(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = service
    response = await client.get("/broken")
    assert response.status_code == 500
    assert "no greeting today" not in response.text
    server, calls = request_trace(kernel, "/broken")
    (call,) = calls
    assert call.name == "greeter.fail"
    assert call.status.status_code is StatusCode.ERROR
    assert [e.name for e in call.events] == ["exception"]
    assert (
        server.attributes.get("http.response.status_code", server.attributes.get("http.status_code")) == 500
    )
