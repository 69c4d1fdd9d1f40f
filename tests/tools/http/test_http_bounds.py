"""The bounds on what a client controls, tried over real sockets against uvicorn.

Each test plays a hostile client on raw sockets and checks two things: the offender is cut off
(with the right status, or a closed connection), and a well-behaved client is served meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.kit import until
from tests.tools.http.http_kit import make_http, running
from tools.http.bounds import load_bounds
from tools.http.http_tool import HttpTool

WAIT = 5.0


async def ping(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    return {"pong": True, "client": context["client"]}


@asynccontextmanager
async def served(monkeypatch: pytest.MonkeyPatch, **env: str) -> AsyncIterator[tuple[HttpTool, str]]:
    http = await make_http(monkeypatch, PORT="0", **env)
    http.add_endpoint("/ping", "GET", ping)
    http.add_endpoint("/ping", "POST", ping)
    http.add_endpoint("/system/health/live", "GET", ping)
    async with running(http) as (url, _, _):
        yield http, url


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


OPENED: list[asyncio.StreamWriter] = []


@pytest.fixture(autouse=True)
async def _close_sockets() -> AsyncIterator[None]:
    yield
    while OPENED:
        writer = OPENED.pop()
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


async def connect(url: str, source: str | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection (closed when the test ends), from ``source`` (another 127.x address) if given."""
    host, port = address(url)
    local = (source, 0) if source else None
    reader, writer = await asyncio.open_connection(host, port, local_addr=local)
    OPENED.append(writer)
    return reader, writer


async def response_of(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """Everything the server sends until it closes: status, headers, body."""
    async with asyncio.timeout(WAIT):
        raw = await reader.read()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, body


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(WAIT):
        try:
            return await reader.read() == b""
        except ConnectionResetError:
            return True


async def well_behaved(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        response = await client.get("/ping")
    assert response.status_code == 200, response.text
    assert response.json()["pong"] is True


def error_kind(body: bytes) -> str:
    return str(json.loads(body)["error"]["kind"])


async def test_a_huge_header_is_refused_with_431_before_it_is_buffered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with served(monkeypatch, HTTP_MAX_HEADER_BYTES="4096") as (_, url):
        reader, writer = await connect(url)
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3000)
        await writer.drain()
        await well_behaved(url)  # served while the offender's head is half sent
        answer = asyncio.create_task(response_of(reader))
        sent = 3000
        try:
            while sent < 64 * 1024 * 1024 and not answer.done():  # a 64 MiB header, stopped early
                writer.write(b"a" * 65536)
                await writer.drain()
                sent += 65536
        except (ConnectionResetError, BrokenPipeError):
            pass
        status, headers, body = await answer
        writer.close()
        assert status == 431
        assert headers["connection"] == "close"
        assert error_kind(body) == "bad_request"
        assert sent < 64 * 1024 * 1024
        await well_behaved(url)


async def test_too_many_headers_is_431_and_a_long_target_is_414(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(monkeypatch, HTTP_MAX_HEADERS="10", HTTP_MAX_URL_BYTES="100") as (_, url):
        reader, writer = await connect(url)
        fields = b"".join(b"X-%d: 1\r\n" % n for n in range(11))
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
        status, _, body = await response_of(reader)
        writer.close()
        assert status == 431
        assert "HTTP_MAX_HEADERS" in json.loads(body)["error"]["message"]

        reader, writer = await connect(url)
        writer.write(b"GET /ping?q=" + b"a" * 200 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _ = await response_of(reader)
        writer.close()
        assert status == 414

        reader, writer = await connect(url)  # at the bound: served
        fields = b"".join(b"X-%d: 1\r\n" % n for n in range(8))
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + fields + b"\r\n")
        status, _, _ = await response_of(reader)
        writer.close()
        assert status == 200


async def test_a_dribbled_head_is_cut_off_with_408(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(monkeypatch, HTTP_HEADER_TIMEOUT="0.5") as (_, url):
        reader, writer = await connect(url)
        writer.write(b"GET /ping HTTP/1.1\r\n")
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = asyncio.create_task(response_of(reader))
        for n in range(200):  # one header line every 20 ms: ~4 s if nobody stops it
            if answer.done():
                break
            try:
                writer.write(b"X-%d: 1\r\n" % n)
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                break
            if n == 5:
                await well_behaved(url)
            await asyncio.sleep(0.02)  # the attacker's pace, not synchronisation
        status, _, body = await answer
        writer.close()
        assert status == 408
        assert "HTTP_HEADER_TIMEOUT" in json.loads(body)["error"]["message"]
        assert loop.time() - started < 3


async def test_a_dribbled_body_is_cut_off_with_408(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(monkeypatch, HTTP_BODY_TIMEOUT="0.5") as (_, url):
        reader, writer = await connect(url)
        writer.write(b'POST /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":')
        await writer.drain()
        await well_behaved(url)
        status, _, body = await response_of(reader)
        writer.close()
        assert status == 408
        assert "HTTP_BODY_TIMEOUT" in json.loads(body)["error"]["message"]
        await well_behaved(url)


async def test_silent_and_idle_connections_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(monkeypatch, HTTP_HEADER_TIMEOUT="0.5", HTTP_KEEPALIVE_TIMEOUT="0.5") as (_, url):
        silent = [await connect(url, "127.0.0.5") for _ in range(50)]
        reader, writer = await connect(url)  # one request, then idle on keep-alive
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(WAIT):
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        await well_behaved(url)
        for silent_reader, _ in silent:
            assert await closed_by_server(silent_reader)
        async with asyncio.timeout(WAIT):
            await reader.read()
        assert reader.at_eof()
        for _, silent_writer in [*silent, (reader, writer)]:
            silent_writer.close()
        await well_behaved(url)


async def test_one_client_cannot_hold_more_than_its_share_of_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with served(monkeypatch, HTTP_MAX_CONNECTIONS_PER_CLIENT="5") as (_, url):
        held = [await connect(url, "127.0.0.2") for _ in range(5)]
        extra_reader, extra_writer = await connect(url, "127.0.0.2")
        assert await closed_by_server(extra_reader)
        await well_behaved(url)  # from 127.0.0.1: its own share
        reader, writer = held[0]
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, _, body = await response_of(reader)  # the held ones are served
        assert status == 200
        assert json.loads(body)["client"] == "127.0.0.2"
        for _, w in [*held, (extra_reader, extra_writer)]:
            w.close()


async def test_past_the_connection_limit_only_liveness_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    async with served(monkeypatch, HTTP_MAX_CONNECTIONS="5") as (http, url):
        held = [await connect(url, "127.0.0.3") for _ in range(5)]
        reader, writer = await connect(url)
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = await response_of(reader)
        writer.close()
        assert status == 503
        assert headers["retry-after"] == "1"
        assert error_kind(body) == "unavailable"
        reader, writer = await connect(url)
        writer.write(b"GET /system/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, _, _ = await response_of(reader)
        writer.close()
        assert status == 200
        for _, w in held:
            w.close()
        await until(_served_again(url), "a well-behaved client is served once connections close")


def _served_again(url: str) -> Any:
    async def check() -> bool:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
            return (await client.get("/ping")).status_code == 200

    return check


async def test_one_client_has_a_bounded_number_of_event_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch, PORT="0", HTTP_MAX_STREAMS_PER_CLIENT="2")
    forever = asyncio.Event()

    async def stream(data: dict[str, Any], context: dict[str, Any]) -> Any:
        yield {"data": "hello"}
        await forever.wait()

    http.add_sse_endpoint("/events", stream)
    http.add_endpoint("/ping", "GET", ping)
    async with running(http) as (url, _, _):
        streams = []
        for _ in range(2):
            reader, writer = await connect(url, "127.0.0.4")
            writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            async with asyncio.timeout(WAIT):
                assert b"data: hello" in await reader.readuntil(b"data: hello")
            streams.append((reader, writer))
        reader, writer = await connect(url, "127.0.0.4")
        writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, headers, body = await response_of(reader)
        writer.close()
        assert status == 429
        assert "retry-after" in headers
        assert error_kind(body) == "rate_limited"
        await well_behaved(url)
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as client:  # another client: served
            async with client.stream("GET", "/events") as response:
                assert response.status_code == 200
        streams[0][1].close()
        await until(lambda: http._streams.by_client.get("127.0.0.4") == 1, "the closed stream is released")
        reader, writer = await connect(url, "127.0.0.4")
        writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(WAIT):
            assert b"data: hello" in await reader.readuntil(b"data: hello")
        for _, w in [*streams[1:], (reader, writer)]:
            w.close()


async def test_forwarded_headers_are_ignored_unless_the_proxy_is_trusted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forged = {"X-Forwarded-For": "203.0.113.9"}
    async with served(monkeypatch) as (_, url), httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/ping", headers=forged)).json()["client"] == "127.0.0.1"
    async with (
        served(monkeypatch, HTTP_TRUSTED_PROXIES="127.0.0.0/8") as (_, url),
        httpx.AsyncClient(base_url=url) as client,
    ):
        assert (await client.get("/ping", headers=forged)).json()["client"] == "203.0.113.9"


async def test_requests_cut_off_by_shutdown_get_503_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch, PORT="0", SHUTDOWN_GRACE_SECONDS="0.2")
    entered = asyncio.Event()

    async def hang(data: dict[str, Any], context: dict[str, Any]) -> None:
        entered.set()
        await asyncio.Event().wait()

    http.add_endpoint("/hang", "GET", hang)
    async with running(http) as (url, stop, task):
        reader, writer = await connect(url)
        writer.write(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(entered.wait(), WAIT)
        stop.set()
        status, headers, body = await response_of(reader)
        writer.close()
    assert status == 503
    assert headers["retry-after"] == "1"
    assert error_kind(body) == "unavailable"


def test_bounds_are_settings_with_safe_defaults() -> None:
    bounds = load_bounds({})
    assert bounds.max_header_bytes == 16384
    assert bounds.trusted_proxies == ()
    assert not bounds.is_trusted_proxy("127.0.0.1")
    custom = load_bounds({"HTTP_TRUSTED_PROXIES": "10.0.0.0/8, ::1", "HTTP_MAX_HEADERS": "7"})
    assert custom.is_trusted_proxy("10.1.2.3") and custom.is_trusted_proxy("::1")
    assert not custom.is_trusted_proxy("11.0.0.1")
    assert custom.max_headers == 7
    for bad in ({"HTTP_MAX_HEADERS": "0"}, {"HTTP_HEADER_TIMEOUT": "-1"}, {"HTTP_TRUSTED_PROXIES": "nope"}):
        with pytest.raises(ValueError):
            load_bounds(bad)


async def test_a_dribbled_second_request_on_a_kept_alive_connection_is_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with served(monkeypatch, HTTP_HEADER_TIMEOUT="0.5", HTTP_KEEPALIVE_TIMEOUT="30") as (_, url):
        reader, writer = await connect(url)
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(WAIT):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
        loop = asyncio.get_running_loop()
        started = loop.time()
        writer.write(b"GET /ping HTTP/1.1\r\nX-Slow: ")  # then nothing more
        await writer.drain()
        await well_behaved(url)
        status, _, _ = await response_of(reader)
        assert status == 408
        assert loop.time() - started < 3, "cut off by the head timeout, not the 30 s keep-alive"


async def test_a_trusted_proxy_is_exempt_from_the_per_client_connection_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {"HTTP_MAX_CONNECTIONS_PER_CLIENT": "2", "HTTP_TRUSTED_PROXIES": "127.0.0.6"}
    async with served(monkeypatch, **env) as (_, url):
        proxied = [await connect(url, "127.0.0.6") for _ in range(4)]  # a proxy carries many clients
        for n, (reader, writer) in enumerate(proxied):
            forwarded = b"X-Forwarded-For: 198.51.100.%d\r\n" % n
            writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n" + forwarded + b"Connection: close\r\n\r\n")
            status, _, body = await response_of(reader)
            assert status == 200
            assert json.loads(body)["client"] == f"198.51.100.{n}"
        untrusted = [await connect(url, "127.0.0.7") for _ in range(2)]
        extra_reader, _ = await connect(url, "127.0.0.7")
        assert await closed_by_server(extra_reader), "anyone else keeps the per-client limit"
        assert len(untrusted) == 2
