"""The real server: uvicorn on a free port, stopped by the kernel's stop event, draining in-flight work."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from core.errors import ToolUnavailableError
from tests.tools.http.http_kit import make_http, running
from tools.http import http_tool
from tools.http.http_tool import HttpTool
from tools.http.server import bind_socket, is_loopback


async def refuses_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        _, writer = await asyncio.open_connection(host, int(port))
    except OSError:
        return True
    writer.close()
    await writer.wait_closed()
    return False


async def test_serves_on_a_free_port_and_says_where(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http = await make_http(monkeypatch, PORT="0")

    async def hello(data: dict[str, Any], context: dict[str, Any]) -> dict[str, str]:
        return {"hello": "world"}

    http.add_endpoint("/hello", "GET", hello)
    with caplog.at_level(logging.INFO, logger="keel.http"):
        async with running(http) as (url, _, _), httpx.AsyncClient(base_url=url) as c:
            response = await c.get("/hello", headers={"X-Request-ID": "wire-1"})
            assert http.base_url == url
    assert response.json() == {"hello": "world"}
    assert response.headers["x-request-id"] == "wire-1"
    port = int(url.rsplit(":", 1)[1])
    assert port != 0
    base = f"http://127.0.0.1:{port}"
    assert f"serving on {base} (API {base}, docs {base}/docs)" in caplog.messages


async def test_stop_lets_in_flight_requests_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch, PORT="0", SHUTDOWN_GRACE_SECONDS="30")
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(data: dict[str, Any], context: dict[str, Any]) -> dict[str, str]:
        entered.set()
        await release.wait()
        return {"finished": "yes"}

    http.add_endpoint("/slow", "GET", slow)
    async with running(http) as (url, stop, serving), httpx.AsyncClient(base_url=url) as c:
        request = asyncio.create_task(c.get("/slow"))
        await asyncio.wait_for(entered.wait(), 10)
        stop.set()
        for _ in range(1000):  # poll, bounded (10 s): the listener closes first
            if await refuses_connections(url):
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the server kept accepting connections after stop")
        assert not serving.done()  # still draining the in-flight request
        release.set()
        response = await asyncio.wait_for(request, 10)
        await asyncio.wait_for(serving, 10)
    assert response.status_code == 200
    assert response.json() == {"finished": "yes"}


async def test_stop_ends_open_event_streams_without_waiting_for_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch, PORT="0", SHUTDOWN_GRACE_SECONDS="60")
    closed = asyncio.Event()

    async def forever(data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {"data": "open"}
            await asyncio.Event().wait()
        finally:
            closed.set()

    http.add_sse_endpoint("/forever", forever)
    async with running(http) as (url, stop, serving), httpx.AsyncClient(base_url=url) as c:
        async with c.stream("GET", "/forever") as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "data: open"
            stop.set()
            rest = [line async for line in lines]  # the server ends the response
        await asyncio.wait_for(serving, 10)  # well inside the 60 s grace
    assert rest == [""]
    assert closed.is_set()
    assert http.open_streams == 0


async def test_a_port_in_use_is_reported_not_hung(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        http = await make_http(monkeypatch, PORT=str(taken.getsockname()[1]))
        serving = asyncio.create_task(http.serve(asyncio.Event()))
        with pytest.raises(ToolUnavailableError, match="cannot listen on 127.0.0.1"):
            await asyncio.wait_for(http.wait_until_serving(), 10)
        with pytest.raises(ToolUnavailableError):
            await asyncio.wait_for(serving, 10)


async def test_signals_are_left_to_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch, PORT="0")
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    async with running(http):
        during = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert during == before


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "http"}, "PORT"),
        ({"PORT": "70000"}, "PORT"),
        ({"SSE_HEARTBEAT_SECONDS": "0"}, "SSE_HEARTBEAT"),
    ],
)
async def test_bad_configuration_fails_setup_with_the_variable_named(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await make_http(monkeypatch, **env)


def test_uvloop_is_offered_to_the_kernel() -> None:
    import uvloop

    assert HttpTool.loop_factory is uvloop.new_event_loop


async def test_the_access_log_is_off_unless_asked_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def ok(data: dict[str, Any], context: dict[str, Any]) -> str:
        return "ok"

    for flag, expected in (("0", 0), ("1", 1)):
        http = await make_http(monkeypatch, PORT="0", HTTP_ACCESS_LOG=flag)
        http.add_endpoint("/ok", "GET", ok)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="uvicorn.access"):
            async with running(http) as (url, _, _), httpx.AsyncClient(base_url=url) as c:
                assert (await c.get("/ok")).status_code == 200
        access = [r for r in caplog.records if r.name == "uvicorn.access"]
        assert len(access) == expected, flag


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.10", False),
        ("::ffff:192.0.2.10", False),
        ("keel.example", False),
        ("localhost.example", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def warnings_when_serving(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    host: str,
    *,
    admin: bool = True,
    validator: bool = False,
) -> list[str]:
    """The http tool's warnings while it serves on ``HOST=host`` (the socket itself is bound on loopback)."""
    monkeypatch.setattr(http_tool, "bind_socket", lambda _host, port: bind_socket("127.0.0.1", port))
    http = await make_http(monkeypatch, HOST=host, PORT="0")

    async def status(data: dict[str, Any], context: dict[str, Any]) -> str:
        return "ok"

    http.add_endpoint("/public", "GET", status)
    http.add_endpoint("/system/status", "GET", status, auth="admin" if admin else True)
    http.add_endpoint("/system/metrics", "GET", status, auth="admin" if admin else True)
    if validator:
        http.set_auth_validator(lambda token: {"admin": True})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="keel.http"):
        async with running(http) as (url, _, _), httpx.AsyncClient(base_url=url) as c:
            assert (await c.get("/public")).status_code == 200
    return [r.getMessage() for r in caplog.records if r.name == "keel.http" and r.levelno == logging.WARNING]


async def test_open_admin_endpoints_on_a_reachable_host_are_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    [warning] = await warnings_when_serving(monkeypatch, caplog, "0.0.0.0")
    assert warning == (
        "HOST=0.0.0.0 is not a loopback address and no token validator is installed, so the 2 admin "
        "(system) endpoints are OPEN to anyone who can reach this port: GET /system/metrics, "
        "GET /system/status. Set AUTH_SECRET_KEY to turn the auth tool on, or listen on HOST=127.0.0.1"
    )


@pytest.mark.parametrize(
    ("host", "admin", "validator"),
    [
        ("127.0.0.1", True, False),  # the single-machine default
        ("localhost", True, False),
        ("::1", True, False),
        ("0.0.0.0", True, True),  # tokens are checked
        ("0.0.0.0", False, False),  # nothing admin-only to leave open
    ],
)
async def test_no_warning_when_admin_endpoints_are_not_open_to_others(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, host: str, admin: bool, validator: bool
) -> None:
    assert await warnings_when_serving(monkeypatch, caplog, host, admin=admin, validator=validator) == []
