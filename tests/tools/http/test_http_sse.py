"""Server-sent-event endpoints: wire format, context, heartbeats, errors, and stopping promptly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.context import bound, current_plugin_var
from core.errors import ForbiddenError, NotFoundError
from tests.tools.http.http_kit import AsgiCall, client, header, make_http
from tools.http.sse import SharedEncoder, format_event


def test_format_event_writes_the_wire_format() -> None:
    assert format_event({"data": "hello"}) == b"data: hello\n\n"
    assert format_event({"data": {"a": [1, 2]}, "event": "tick", "id": "7", "retry": 3000}) == (
        b'id: 7\nevent: tick\nretry: 3000\ndata: {"a":[1,2]}\n\n'
    )
    assert format_event({"data": "one\ntwo\r\nthree"}) == b"data: one\ndata: two\ndata: three\n\n"
    assert format_event({"data": ""}) == b"data: \n\n"


@pytest.mark.parametrize(
    "item",
    [
        {"event": "x"},
        {"data": "x", "id": "a\nb"},
        {"data": "x", "retry": -1},
        {"data": "x", "retry": "5"},
        "text",
    ],
)
def test_format_event_refuses_malformed_items(item: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        format_event(item)


class Feed:
    """A stream whose events the test pushes, recording what the endpoint saw and how it ended."""

    keel_identity = "demo.Feed"

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.contexts: list[dict[str, Any]] = []
        self.data: list[dict[str, Any]] = []
        self.closed = asyncio.Event()

    async def stream(self, data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self.data.append(data)
        self.contexts.append(context)
        try:
            while True:
                yield await self.queue.get()
        finally:
            self.closed.set()


async def test_events_are_streamed_with_sse_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    feed = Feed()
    http.add_sse_endpoint("/feed/{topic}", feed.stream)
    call = AsgiCall(http.asgi, "/feed/news", query=b"since=3", headers=[("X-Request-ID", "s-1")]).start()
    start = await call.start_message()
    assert start["status"] == 200
    assert header(start, "content-type") == "text/event-stream; charset=utf-8"
    assert header(start, "cache-control") == "no-cache"
    assert header(start, "x-accel-buffering") == "no"
    assert header(start, "x-request-id") == "s-1"
    await feed.queue.put({"data": {"n": 1}, "id": "1"})
    assert await call.body_until(b"\n\n") == b'id: 1\ndata: {"n":1}\n\n'
    assert feed.data == [{"topic": "news", "since": "3"}]
    call.client_gone.set()
    await call.finished()
    assert feed.closed.is_set()
    assert http.open_streams == 0


@pytest.mark.parametrize(
    ("headers", "query", "expected"),
    [
        ([("Last-Event-ID", "41")], b"", "41"),
        ([], b"last_event_id=17", "17"),
        ([], b"", None),
    ],
)
async def test_last_event_id_comes_from_the_header_or_the_query(
    monkeypatch: pytest.MonkeyPatch, headers: list[tuple[str, str]], query: bytes, expected: str | None
) -> None:
    http = await make_http(monkeypatch)
    feed = Feed()
    http.add_sse_endpoint("/feed", feed.stream)
    call = AsgiCall(http.asgi, "/feed", query=query, headers=headers).start()
    await call.start_message()
    await feed.queue.put({"data": "x"})
    await call.body_until(b"\n\n")
    assert feed.contexts[0]["last_event_id"] == expected
    assert "last_event_id" not in feed.data[0]  # a control parameter, not data
    call.client_gone.set()
    await call.finished()


async def test_an_idle_stream_sends_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch, SSE_HEARTBEAT_SECONDS="0.01")
    feed = Feed()
    http.add_sse_endpoint("/feed", feed.stream)
    call = AsgiCall(http.asgi, "/feed").start()
    await call.start_message()
    assert await call.body_until(b": keep-alive\n\n") == b": keep-alive\n\n"
    call.client_gone.set()
    await call.finished()


async def test_stopping_the_server_ends_open_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    feed = Feed()
    http.add_sse_endpoint("/feed", feed.stream)
    call = AsgiCall(http.asgi, "/feed").start()
    await call.start_message()
    await feed.queue.put({"data": "x"})
    await call.body_until(b"\n\n")
    assert http.open_streams == 1
    await http.shutdown()
    last = await call.message()
    assert last == {"type": "http.response.body", "body": b"", "more_body": False}
    await call.finished()
    assert feed.closed.is_set()
    assert http.open_streams == 0


async def test_refusing_before_the_stream_starts_is_an_error_envelope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)

    def missing(data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        raise NotFoundError(f"no topic {data['topic']}")

    http.add_sse_endpoint("/topics/{topic}", missing)
    async with client(http) as c:
        response = await c.get("/topics/ghost", headers={"X-Request-ID": "sse-404"})
    assert response.status_code == 404
    assert response.json() == {
        "error": {"kind": "not_found", "message": "no topic ghost", "request_id": "sse-404"}
    }


async def test_a_failure_inside_the_stream_ends_it_with_an_error_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)

    async def flaky(data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        yield {"data": "first"}
        raise ForbiddenError("subscription revoked")

    http.add_sse_endpoint("/flaky", flaky)
    async with client(http) as c:
        response = await c.get("/flaky", headers={"X-Request-ID": "f-1"})
    assert response.status_code == 200
    assert response.text == (
        "data: first\n\n"
        "event: error\n"
        'data: {"error":{"kind":"forbidden","message":"subscription revoked","request_id":"f-1"}}\n\n'
    )


async def test_a_stream_that_ends_closes_the_response(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def three(data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        for number in range(3):
            yield {"data": str(number), "id": str(number)}

    http.add_sse_endpoint("/three", three)
    async with client(http) as c:
        response = await c.get("/three")
    assert response.text == "id: 0\ndata: 0\n\nid: 1\ndata: 1\n\nid: 2\ndata: 2\n\n"


async def test_sse_endpoints_accept_an_access_token_query_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.set_auth_validator(lambda token: {"sub": "ann"} if token == "good" else None)

    async def mine(data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        yield {"data": {"who": context["identity"]["sub"], "data": data}}

    http.add_sse_endpoint("/mine", mine, auth=True)
    async with client(http) as c:
        refused = await c.get("/mine?access_token=bad")
        allowed = await c.get("/mine?access_token=good")
    assert refused.status_code == 401
    assert allowed.text == 'data: {"who":"ann","data":{}}\n\n'


async def test_releasing_a_stream_route_ends_its_open_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    feed, other = Feed(), Feed()
    with bound(current_plugin_var, "demo.Feed"):
        http.add_sse_endpoint("/feed", feed.stream)
    with bound(current_plugin_var, "demo.Other"):
        http.add_sse_endpoint("/other", other.stream)
    call = AsgiCall(http.asgi, "/feed").start()
    kept = AsgiCall(http.asgi, "/other").start()
    for started, source in ((call, feed), (kept, other)):
        await started.start_message()
        await source.queue.put({"data": "x"})
        await started.body_until(b"\n\n")
    http.release_owner("demo.Feed")
    assert await call.message() == {"type": "http.response.body", "body": b"", "more_body": False}
    await call.finished()
    assert feed.closed.is_set()
    assert http.open_streams == 1  # the other plugin's stream goes on
    kept.client_gone.set()
    await kept.finished()


async def test_replacing_a_stream_route_from_a_worker_thread_ends_the_old_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    old, new = Feed(), Feed()
    with bound(current_plugin_var, "demo.Feed"):
        http.add_sse_endpoint("/feed", old.stream)
    call = AsgiCall(http.asgi, "/feed").start()
    await call.start_message()
    await old.queue.put({"data": "x"})
    await call.body_until(b"\n\n")

    def reload() -> None:  # what a plain ``def on_boot`` does, in the kernel's worker thread
        with bound(current_plugin_var, "demo.Feed"):
            http.add_sse_endpoint("/feed", new.stream)

    await asyncio.to_thread(reload)
    assert await call.message() == {"type": "http.response.body", "body": b"", "more_body": False}
    await call.finished()
    assert old.closed.is_set()


def test_a_shared_encoder_encodes_a_batch_as_its_events_back_to_back_and_once() -> None:
    encode = SharedEncoder()
    first, second = {"id": "1", "data": "a"}, {"id": "2", "data": {"n": 2}}
    batch = [first, second]
    chunk = encode(batch)
    assert chunk == format_event(first) + format_event(second)
    assert encode(batch) is chunk  # the same list again: not encoded again
    assert encode(first) is encode(first)  # its events were kept too (a slow client's slice reuses them)


class BatchFeed:
    """A fan-out that offers ``batches()``: the writer must read those, not the events one by one."""

    keel_identity = "demo.BatchFeed"

    def __init__(self, batches: list[list[dict[str, Any]]]) -> None:
        self.batches = batches

    def stream(self, data: dict[str, Any], context: dict[str, Any]) -> Any:
        batches = self.batches

        class Events:
            def __aiter__(self) -> Events:
                return self

            async def __anext__(self) -> dict[str, Any]:
                raise AssertionError("read one event at a time although batches() is there")

            async def batches(self) -> AsyncIterator[list[dict[str, Any]]]:
                for batch in batches:
                    yield batch

        return Events()


async def test_an_iterator_with_batches_is_read_a_batch_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    feed = BatchFeed([[{"data": "a"}, {"data": "b"}], [{"data": "c"}]])
    http.add_sse_endpoint("/batches", feed.stream)
    call = AsgiCall(http.asgi, "/batches").start()
    await call.start_message()
    assert await call.body_until(b"data: c\n\n") == b"data: a\n\ndata: b\n\ndata: c\n\n"
    await call.finished()
