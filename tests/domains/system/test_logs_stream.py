"""The live log stream: ids, Last-Event-ID replay, per-client bounded queues, thread hand-off."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core import current_event_id_var
from core.errors import InvalidInputError
from domains.system.plugins.logs_stream import LogBroadcast, SystemLogsStreamPlugin, client_events


def publish(broadcast: LogBroadcast, *messages: str, level: str = "INFO") -> None:
    for message in messages:
        broadcast.publish(level, message, "2025-01-01T00:00:00.000000+00:00", "demo.Plugin.run")


async def take(events: AsyncIterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(5):
        return [await anext(events) for _ in range(count)]


def summary(events: list[dict[str, Any]]) -> list[Any]:
    """Log lines as their message, drop notices as ("dropped", n)."""
    return [
        ("dropped", event["data"]["dropped"]) if event.get("event") == "dropped" else event["data"]["message"]
        for event in events
    ]


async def test_each_line_is_an_event_with_an_increasing_id() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    publish(broadcast, "one", "two")
    events = client_events(broadcast, last_event_id=0)
    first, second = await take(events, 2)
    assert first == {
        "id": "1",
        "data": {
            "id": 1,
            "level": "INFO",
            "message": "one",
            "timestamp": "2025-01-01T00:00:00.000000+00:00",
            "identity": "demo.Plugin.run",
            "event_id": None,
            "trace_id": None,
            "span_id": None,
            "process": {"pid": os.getpid(), "host": socket.gethostname()},
        },
    }
    assert second["id"] == "2"
    await events.aclose()


async def test_a_line_logged_inside_a_span_carries_its_trace_and_span_ids() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    broadcast.publish("INFO", "traced", "2025-01-01T00:00:00.000000+00:00", None, ("a" * 32, "b" * 16))
    events = client_events(broadcast, last_event_id=0)
    (event,) = await take(events, 1)
    assert (event["data"]["trace_id"], event["data"]["span_id"]) == ("a" * 32, "b" * 16)
    await events.aclose()


async def test_last_event_id_replays_what_the_client_missed() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    publish(broadcast, "l1", "l2", "l3", "l4", "l5")
    events = client_events(broadcast, last_event_id=2)
    assert summary(await take(events, 3)) == ["l3", "l4", "l5"]
    publish(broadcast, "l6")
    assert summary(await take(events, 1)) == ["l6"]
    await events.aclose()


async def test_lines_gone_from_the_backlog_are_counted() -> None:
    broadcast = LogBroadcast(backlog=3, client_queue=10)
    publish(broadcast, *(f"l{n}" for n in range(1, 11)))  # the backlog keeps l8..l10
    events = client_events(broadcast, last_event_id=2)
    assert summary(await take(events, 4)) == [("dropped", 5), "l8", "l9", "l10"]
    await events.aclose()


async def test_an_id_from_before_a_restart_gets_the_whole_backlog() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    publish(broadcast, "a", "b")
    events = client_events(broadcast, last_event_id=5000)
    assert summary(await take(events, 2)) == ["a", "b"]
    await events.aclose()


async def test_a_slow_client_loses_lines_and_is_told_how_many_at_the_gap() -> None:
    broadcast = LogBroadcast(backlog=100, client_queue=3)
    publish(broadcast, "l1")
    slow = client_events(broadcast, last_event_id=0)
    assert summary(await take(slow, 1)) == ["l1"]  # subscribed now, and not reading
    fast = client_events(broadcast, last_event_id=1)
    publish(broadcast, *(f"l{n}" for n in range(2, 12)))  # 10 lines; the slow queue holds 3
    assert summary(await take(slow, 4)) == ["l2", "l3", "l4", ("dropped", 7)]
    publish(broadcast, "l12")
    assert summary(await take(slow, 1)) == ["l12"]
    assert summary(await take(fast, 11)) == [f"l{n}" for n in range(2, 13)]  # nothing lost elsewhere
    for events in (slow, fast):
        await events.aclose()


async def test_lines_after_a_gap_stay_in_order() -> None:
    broadcast = LogBroadcast(backlog=100, client_queue=2)
    publish(broadcast, "l0")
    events = client_events(broadcast, last_event_id=0)
    await take(events, 1)
    publish(broadcast, "l1", "l2", "l3", "l4")  # queue: l1 l2 [dropped 2]
    assert summary(await take(events, 1)) == ["l1"]
    publish(broadcast, "l5")  # still full (l2 + the marker): dropped
    assert summary(await take(events, 2)) == ["l2", ("dropped", 3)]
    publish(broadcast, "l6")
    assert summary(await take(events, 1)) == ["l6"]
    await events.aclose()


async def test_a_level_filter_applies_to_replay_and_live_lines() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    publish(broadcast, "info 1")
    publish(broadcast, "warn 1", level="WARNING")
    events = client_events(broadcast, last_event_id=0, min_level=30)
    assert summary(await take(events, 1)) == ["warn 1"]
    publish(broadcast, "info 2")
    publish(broadcast, "error 1", level="ERROR")
    assert summary(await take(events, 1)) == ["error 1"]
    await events.aclose()


async def test_a_client_that_goes_away_is_unsubscribed() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    publish(broadcast, "x")
    events = client_events(broadcast, last_event_id=0)
    await take(events, 1)
    assert len(broadcast.clients) == 1
    await events.aclose()
    assert broadcast.clients == set()


class FakeHttp:
    def __init__(self) -> None:
        self.streams: dict[str, Any] = {}

    def add_sse_endpoint(self, path: str, stream: Any, **options: Any) -> None:
        self.streams[path] = (stream, options)


class FakeLogger:
    def __init__(self) -> None:
        self.sinks: list[Any] = []

    def add_sink(self, sink: Any) -> None:
        self.sinks.append(sink)

    def remove_sink(self, sink: Any) -> None:  # like the real tool: removing twice is fine
        if sink in self.sinks:
            self.sinks.remove(sink)


@pytest.fixture
async def plugin(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SystemLogsStreamPlugin]:
    monkeypatch.delenv("LOG_STREAM_BACKLOG", raising=False)
    monkeypatch.delenv("LOG_STREAM_CLIENT_QUEUE", raising=False)
    instance = SystemLogsStreamPlugin(FakeHttp(), FakeLogger())
    await instance.on_boot()
    yield instance
    await instance.on_shutdown()


async def test_the_plugin_registers_an_admin_stream_and_a_sink(plugin: SystemLogsStreamPlugin) -> None:
    stream, options = plugin.http.streams["/system/logs/stream"]
    assert options["auth"] == "admin"
    assert plugin.logger.sinks == [plugin.on_log]
    await plugin.on_shutdown()
    assert plugin.logger.sinks == []


async def test_lines_logged_on_other_threads_are_handed_to_the_loop(plugin: SystemLogsStreamPlugin) -> None:
    plugin.on_log("INFO", "on the loop", "t", None)
    assert plugin.broadcast.last_id == 1  # published at once on the loop thread
    events = plugin.stream({}, {"last_event_id": "0"})
    assert summary(await take(events, 1)) == ["on the loop"]
    worker = threading.Thread(target=plugin.on_log, args=("WARNING", "from a worker", "t", "demo.W.run"))
    worker.start()
    worker.join(5)
    assert summary(await take(events, 1)) == ["from a worker"]
    await events.aclose()


@pytest.mark.parametrize(
    ("data", "context", "field"),
    [({}, {"last_event_id": "abc"}, "last_event_id"), ({"level": "LOUD"}, {"last_event_id": None}, "level")],
)
async def test_bad_stream_parameters_are_refused_before_streaming(
    plugin: SystemLogsStreamPlugin, data: dict[str, Any], context: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        plugin.stream(data, context)
    fields = raised.value.fields
    assert fields is not None and fields[0]["field"] == field


@pytest.mark.parametrize("name", ["LOG_STREAM_BACKLOG", "LOG_STREAM_CLIENT_QUEUE"])
def test_sizes_must_be_positive(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "0")
    with pytest.raises(ValueError, match=name):
        SystemLogsStreamPlugin(FakeHttp(), FakeLogger())


async def test_a_line_carries_the_request_or_event_it_was_logged_under(
    plugin: SystemLogsStreamPlugin,
) -> None:
    events = plugin.stream({}, {"last_event_id": "0"})
    token = current_event_id_var.set("req-on-the-loop")
    try:
        plugin.on_log("INFO", "inside a request", "t", "demo.P.run")
        context = contextvars.copy_context()  # what asyncio.to_thread hands a worker thread
    finally:
        current_event_id_var.reset(token)
    plugin.on_log("INFO", "outside", "t", None)
    worker = threading.Thread(target=context.run, args=(plugin.on_log, "INFO", "in a worker", "t", None))
    worker.start()
    worker.join(5)
    lines = [event["data"] for event in await take(events, 3)]
    assert [(line["message"], line["event_id"]) for line in lines] == [
        ("inside a request", "req-on-the-loop"),
        ("outside", None),
        ("in a worker", "req-on-the-loop"),
    ]
    await events.aclose()


async def take_batches(events: Any, count: int) -> list[list[dict[str, Any]]]:
    async with asyncio.timeout(5):
        return [await anext(events) for _ in range(count)]


async def test_lines_of_one_loop_step_reach_every_client_as_one_shared_run() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    streams = [client_events(broadcast, last_event_id=None) for _ in range(3)]
    runs = [stream.batches() for stream in streams]
    waiting = [asyncio.ensure_future(anext(run)) for run in runs]
    while len(broadcast.clients) < 3:  # each subscribes at its first step
        await asyncio.wait(waiting, timeout=0.01)
    publish(broadcast, "a", "b", "c")
    async with asyncio.timeout(5):
        got = await asyncio.gather(*waiting)
    assert [summary(run) for run in got] == [["a", "b", "c"]] * 3
    assert got[0] is got[1] is got[2]  # one list for all: the SSE writer encodes it once
    for stream in streams:
        await stream.aclose()
    assert broadcast.clients == set()


async def test_batches_replay_first_and_count_a_slow_clients_drops() -> None:
    broadcast = LogBroadcast(backlog=100, client_queue=3)
    publish(broadcast, "l1", "l2")
    stream = client_events(broadcast, last_event_id=1)
    runs = stream.batches()
    assert summary((await take_batches(runs, 1))[0]) == ["l2"]  # the replay, as one run
    publish(broadcast, *(f"l{n}" for n in range(3, 9)))  # 6 lines; the queue holds 3
    assert [summary(run) for run in await take_batches(runs, 2)] == [["l3", "l4", "l5"], [("dropped", 3)]]
    publish(broadcast, "l9")
    assert summary((await take_batches(runs, 1))[0]) == ["l9"]
    await stream.aclose()
    assert broadcast.clients == set()


async def test_a_level_filter_applies_to_runs() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    stream = client_events(broadcast, last_event_id=None, min_level=30)
    runs = stream.batches()
    waiting = asyncio.ensure_future(anext(runs))
    while not broadcast.clients:
        await asyncio.wait([waiting], timeout=0.01)
    publish(broadcast, "info")
    publish(broadcast, "warn", level="WARNING")
    async with asyncio.timeout(5):
        assert summary(await waiting) == ["warn"]
    await stream.aclose()


async def test_a_stream_forgotten_without_closing_is_unsubscribed() -> None:
    broadcast = LogBroadcast(backlog=10, client_queue=10)
    publish(broadcast, "x")
    events = client_events(broadcast, last_event_id=0)
    await take(events, 1)
    assert len(broadcast.clients) == 1
    del events
    gc.collect()
    assert broadcast.clients == set()
