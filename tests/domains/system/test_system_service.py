"""The whole service over a real uvicorn: drop a plugin in, call it, read its log line live."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kit import make_root, serving, sse_events, write

HELLO_PLUGIN = """
    from core import BasePlugin


    class Hello(BasePlugin):
        def __init__(self, http, logger):
            self.http = http
            self.logger = logger

        def on_boot(self):
            self.http.add_endpoint("/hello/{name}", "GET", self.handler, tags=["demo"])

        async def handler(self, data, context):
            self.logger.info("greeting %s", data["name"])
            return {"greeting": f"hello {data['name']}"}
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("LOG_LEVEL", "LOG_STREAM_BACKLOG", "LOG_STREAM_CLIENT_QUEUE", "SSE_HEARTBEAT_SECONDS"):
        monkeypatch.delenv(key, raising=False)
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system",))
    write(root, "domains/demo/plugins/hello.py", HELLO_PLUGIN)
    return root


async def first_matching(events: AsyncIterator[dict[str, Any]], message: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        async for event in events:
            if event.get("data", {}).get("message") == message:
                return event
    raise AssertionError(f"the stream ended without {message!r}")


async def test_a_dropped_in_plugin_is_served_and_its_log_line_streamed_live(root: Path) -> None:
    async with serving(root) as (kernel, url), httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with client.stream("GET", "/system/logs/stream") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = sse_events(stream)
            response = await client.get("/hello/ann", headers={"X-Request-ID": "tour-1"})
            line = await first_matching(events, "greeting ann")
        assert response.status_code == 200
        assert response.json() == {"greeting": "hello ann"}
        assert response.headers["x-request-id"] == "tour-1"
        assert line["data"]["identity"] == "demo.Hello.handler"
        assert line["data"]["level"] == "INFO"
        assert line["id"] == str(line["data"]["id"])
        assert kernel.registry.get_system_dump()["plugins"]["demo.Hello"]["status"] == "READY"


async def test_last_event_id_replays_missed_lines_over_the_wire(root: Path) -> None:
    async with serving(root) as (_, url), httpx.AsyncClient(base_url=url, timeout=10) as client:
        await client.get("/hello/first")
        async with client.stream("GET", "/system/logs/stream", headers={"Last-Event-ID": "0"}) as stream:
            seen = await first_matching(sse_events(stream), "greeting first")
        await client.get("/hello/second")
        await client.get("/hello/third")
        resume = {"Last-Event-ID": seen["id"]}
        async with client.stream("GET", "/system/logs/stream", headers=resume) as stream:
            events = sse_events(stream)
            second = await first_matching(events, "greeting second")
            third = await first_matching(events, "greeting third")
    assert int(seen["id"]) < int(second["id"]) < int(third["id"])


async def test_system_endpoints_and_docs_over_http(root: Path) -> None:
    async with serving(root) as (_, url), httpx.AsyncClient(base_url=url, timeout=10) as client:
        health = await client.get("/system/health")
        status = await client.get("/system/status")
        metrics = await client.get("/system/metrics")
        schema = (await client.get("/openapi.json")).json()
        missing = await client.get("/nope")
    assert (health.status_code, health.json()["status"]) == (200, "ok")
    assert status.json()["plugins"]["demo.Hello"]["dependencies"] == ["http", "logger"]
    assert "summary" in metrics.json()
    assert schema["paths"]["/hello/{name}"]["get"]["tags"] == ["demo"]
    assert {"/system/status", "/system/metrics", "/system/health", "/system/logs/stream"} <= set(
        schema["paths"]
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["kind"] == "not_found"
