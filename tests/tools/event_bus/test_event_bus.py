"""The in-process event bus: delivery, causality, identity, isolation, request/reply, owners."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.context import bound, current_event_id_var, current_identity_var, current_plugin_var
from tests.kit import booted, make_root, write
from tools.event_bus import event_bus_tool
from tools.event_bus.errors import EventNoReplyError, EventPayloadError, EventRequestTimeout
from tools.event_bus.event_bus_tool import EventBusTool
from tools.event_bus.events import Event
from tools.event_bus.payload import freeze_json


async def completed(bus: EventBusTool, count: int) -> list[dict[str, Any]]:
    """The first ``count`` trace records to complete (already or from now on), bounded in time."""
    records: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        async for record in bus.trace_stream(after=0):
            records.append(record)
            if len(records) == count:
                return records
    raise AssertionError("unreachable")


class Plugin:
    """Stands in for a booted plugin: the kernel gives every instance its identity."""

    keel_identity = "shop.Orders"

    def __init__(self, bus: EventBusTool) -> None:
        self.bus = bus
        self.seen: list[Event] = []

    async def on_created(self, event: Event) -> None:
        self.seen.append(event)
        await self.bus.publish("order.charged", {"order": event.payload["order"]})

    async def on_charged(self, event: Event) -> None:
        self.seen.append(event)
        await self.bus.publish("order.shipped", {"order": event.payload["order"]})

    async def on_shipped(self, event: Event) -> None:
        self.seen.append(event)


# -- delivery and causality ---------------------------------------------------------------------


async def test_a_subscriber_gets_the_event_with_its_origin(event_bus: EventBusTool) -> None:
    received: list[Event] = []

    async def handler(event: Event) -> None:
        received.append(event)

    await event_bus.subscribe("greeting", handler)
    with bound(current_identity_var, "web.Hello.post"):
        event_id = await event_bus.publish("greeting", {"text": "hi", "tags": ["a"]})
    await completed(event_bus, 1)
    [event] = received
    assert (event.id, event.name, event.payload, event.parent_id, event.emitter) == (
        event_id,
        "greeting",
        {"text": "hi", "tags": ["a"]},
        None,
        "web.Hello.post",
    )


async def test_causality_across_three_hops_from_an_http_request(event_bus: EventBusTool) -> None:
    plugin = Plugin(event_bus)
    await event_bus.subscribe("order.created", plugin.on_created)
    await event_bus.subscribe("order.charged", plugin.on_charged)
    await event_bus.subscribe("order.shipped", plugin.on_shipped)
    with bound(current_event_id_var, "request-42"):  # what the http tool does around a handler
        first = await event_bus.publish("order.created", {"order": 7})
    await completed(event_bus, 3)
    created, charged, shipped = plugin.seen
    assert (created.id, created.parent_id) == (first, "request-42")
    assert charged.parent_id == created.id and shipped.parent_id == charged.id
    assert (charged.emitter, shipped.emitter) == ("shop.Orders.on_created", "shop.Orders.on_charged")
    tree = event_bus.trace_tree("request-42")
    assert tree is not None
    chain = []
    node = tree
    while node["children"]:
        [node] = node["children"]
        chain.append((node["name"], node["subscribers"][0]["subscriber"], node["subscribers"][0]["outcome"]))
    assert chain == [
        ("order.created", "shop.Orders.on_created", "ok"),
        ("order.charged", "shop.Orders.on_charged", "ok"),
        ("order.shipped", "shop.Orders.on_shipped", "ok"),
    ]
    subtree = event_bus.trace_tree(charged.id)
    assert subtree is not None and [c["id"] for c in subtree["children"]] == [shipped.id]
    assert event_bus.trace_tree("unknown") is None


async def test_context_is_set_for_each_subscriber_and_reset_after(event_bus: EventBusTool) -> None:
    seen: list[tuple[str | None, str | None]] = []

    async def record_context(event: Event) -> None:
        seen.append((current_event_id_var.get(), current_identity_var.get()))

    await event_bus.subscribe("tick", record_context)
    event_id = await event_bus.publish("tick")
    await completed(event_bus, 1)
    assert seen == [
        (event_id, "test_context_is_set_for_each_subscriber_and_reset_after.<locals>.record_context")
    ]
    assert (current_event_id_var.get(), current_identity_var.get()) == (None, None)


# -- identity in logs, failures isolated ------------------------------------------------------------


class IdentityCapture(logging.Handler):
    """Records, for each log line, the identity that was current when it was written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, str | None, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.name, current_identity_var.get(), record.getMessage()))


@pytest.fixture
def identities(caplog: pytest.LogCaptureFixture) -> Any:
    caplog.set_level(logging.INFO, logger="shop")
    capture = IdentityCapture()
    root = logging.getLogger()
    root.addHandler(capture)
    yield capture
    root.removeHandler(capture)


class Shop:
    keel_identity = "shop.Billing"

    async def on_paid(self, event: Event) -> None:
        logging.getLogger("shop").info("charging order %s", event.payload["order"])

    async def on_broken(self, event: Event) -> None:
        raise RuntimeError("card declined")


async def test_log_lines_of_a_subscriber_are_attributed_to_it(
    event_bus: EventBusTool, identities: Any
) -> None:
    shop = Shop()
    await event_bus.subscribe("order.paid", shop.on_paid)
    await event_bus.subscribe("order.paid", shop.on_broken)
    await event_bus.publish("order.paid", {"order": 3})
    await completed(event_bus, 1)
    assert ("shop", "shop.Billing.on_paid", "charging order 3") in identities.lines
    lines = [line for line in identities.lines if line[0] == "keel.event_bus"]
    retries, failures = lines[:-1], lines[-1:]
    assert len(retries) == 4 and all("retrying" in line[2] for line in retries)  # 5 attempts
    assert len(failures) == 1
    assert failures[0][1] == "shop.Billing.on_broken"  # the failure itself is logged as the subscriber
    assert "subscriber shop.Billing.on_broken failed on order.paid" in failures[0][2]
    assert "RuntimeError: card declined" in failures[0][2]


async def test_a_failing_subscriber_is_isolated_and_counted(event_bus: EventBusTool) -> None:
    received: list[int] = []

    async def fine(event: Event) -> None:
        received.append(event.payload["n"])

    shop = Shop()
    await event_bus.subscribe("order.paid", shop.on_broken)
    await event_bus.subscribe("order.paid", fine)
    for n in range(3):
        await event_bus.publish("order.paid", {"n": n})  # publish never sees a subscriber's failure
    records = await completed(event_bus, 3)
    assert received == [0, 1, 2]
    outcomes = [(s["subscriber"], s["outcome"], s["error"]) for s in records[0]["subscribers"]]
    assert outcomes == [
        ("shop.Billing.on_broken", "error", "RuntimeError: card declined"),
        ("test_a_failing_subscriber_is_isolated_and_counted.<locals>.fine", "ok", None),
    ]
    counts = {s["subscriber"]: s["failed"] for s in event_bus.subscriptions()}
    assert counts["shop.Billing.on_broken"] == 3
    assert event_bus.stats()["failed_deliveries"] == 3


async def test_plain_handlers_run_in_a_worker_thread_with_the_context(event_bus: EventBusTool) -> None:
    seen: list[tuple[bool, str | None]] = []
    loop_thread = threading.get_ident()

    def blocking(event: Event) -> None:
        seen.append((threading.get_ident() != loop_thread, current_event_id_var.get()))

    await event_bus.subscribe("work", blocking)
    event_id = await event_bus.publish("work")
    await completed(event_bus, 1)
    assert seen == [(True, event_id)]


# -- payloads --------------------------------------------------------------------------------------


class Status(StrEnum):
    PAID = "paid"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"ids": (1, 2)}, "payload['ids'] is a tuple; use a list"),
        ({"tags": {"a"}}, "payload['tags'] is a set, which is not a JSON value"),
        ({"raw": b"x"}, "payload['raw'] is a bytes"),
        ({"ratio": float("nan")}, "payload['ratio'] is nan, which JSON cannot carry"),
        ({"deep": [{"ok": 1}, {"bad": float("inf")}]}, "payload['deep'][1]['bad'] is inf"),
        ({1: "one"}, "payload has the key 1 (int); JSON keys are strings"),
        (object(), "payload is a object, which is not a JSON value"),
    ],
)
async def test_a_payload_that_is_not_json_is_refused_and_nothing_is_sent(
    event_bus: EventBusTool, payload: Any, message: str
) -> None:
    received: list[Event] = []

    async def handler(event: Event) -> None:
        received.append(event)

    await event_bus.subscribe("x", handler)
    with pytest.raises(EventPayloadError) as caught:
        await event_bus.publish("x", payload)
    assert message in str(caught.value)
    assert event_bus.trace_records() == [] and received == []


async def test_subscribers_get_a_frozen_copy(event_bus: EventBusTool) -> None:
    got: list[Any] = []

    async def mutate(event: Event) -> None:
        got.append(event.payload)
        with pytest.raises(TypeError):
            event.payload["items"].append(4)

    await event_bus.subscribe("x", mutate)
    payload: dict[str, Any] = {"items": [1, 2, 3], "status": Status.PAID}
    await event_bus.publish("x", payload)
    payload["items"].append(99)  # the publisher changing its dict afterwards changes nothing
    await completed(event_bus, 1)
    assert got == [{"items": [1, 2, 3], "status": "paid"}]
    assert type(got[0]["status"]) is str  # delivered as JSON would carry it


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(json_values)
def test_an_accepted_payload_is_exactly_its_json_round_trip(value: Any) -> None:
    assert freeze_json(value) == json.loads(json.dumps(value))


# -- request / reply ---------------------------------------------------------------------------------


async def test_request_returns_the_first_reply(event_bus: EventBusTool) -> None:
    async def silent(event: Event) -> None:
        return None

    async def quote(event: Event) -> dict[str, Any]:
        return {"sku": event.payload["sku"], "price": 12}

    await event_bus.subscribe("price.quote", silent)
    await event_bus.subscribe("price.quote", quote)
    assert await event_bus.request("price.quote", {"sku": "A"}) == {"sku": "A", "price": 12}


async def test_request_without_an_answer_fails_at_once(event_bus: EventBusTool) -> None:
    with pytest.raises(EventNoReplyError, match="nobody subscribes to it"):
        await event_bus.request("nobody.home", timeout=30)

    async def silent(event: Event) -> None:
        return None

    await event_bus.subscribe("quiet", silent)
    with pytest.raises(EventNoReplyError, match="every subscriber finished without a reply"):
        await event_bus.request("quiet", timeout=30)


async def test_request_times_out(event_bus: EventBusTool) -> None:
    release = asyncio.Event()

    async def slow(event: Event) -> str:
        await release.wait()
        return "too late"

    await event_bus.subscribe("slow", slow)
    with pytest.raises(EventRequestTimeout, match="no reply to 'slow' within 0.05s"):
        await event_bus.request("slow", timeout=0.05)
    release.set()
    await completed(event_bus, 1)


async def test_a_reply_that_is_not_json_is_an_error_for_the_requester(event_bus: EventBusTool) -> None:
    async def odd(event: Event) -> object:
        return {1, 2}

    await event_bus.subscribe("odd", odd)
    with pytest.raises(EventPayloadError, match="reply is a set"):
        await event_bus.request("odd")


# -- subscriptions and owners -------------------------------------------------------------------------


async def test_subscribing_twice_delivers_once_and_unsubscribe_reports(event_bus: EventBusTool) -> None:
    calls: list[str] = []

    async def handler(event: Event) -> None:
        calls.append(event.id)

    await event_bus.subscribe("x", handler)
    await event_bus.subscribe("x", handler)
    await event_bus.publish("x")
    await completed(event_bus, 1)
    assert len(calls) == 1
    assert await event_bus.unsubscribe("x", handler) is True
    assert await event_bus.unsubscribe("x", handler) is False
    await event_bus.publish("x")
    await completed(event_bus, 2)
    assert len(calls) == 1


async def test_release_owner_drops_only_that_plugins_subscriptions(event_bus: EventBusTool) -> None:
    calls: list[str] = []

    async def mine(event: Event) -> None:
        calls.append("mine")

    async def theirs(event: Event) -> None:
        calls.append("theirs")

    with bound(current_plugin_var, "shop.Orders"):
        await event_bus.subscribe("x", mine)
    with bound(current_plugin_var, "shop.Billing"):
        await event_bus.subscribe("x", theirs)
    assert {s["owner"] for s in event_bus.subscriptions()} == {"shop.Orders", "shop.Billing"}
    event_bus.release_owner("shop.Orders")
    await event_bus.publish("x")
    await completed(event_bus, 1)
    assert calls == ["theirs"]


# -- configuration and lifecycle -------------------------------------------------------------------------


async def test_the_trace_keeps_only_the_newest_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENT_TRACE_BUFFER", "3")
    bus = EventBusTool()
    await bus.setup()
    ids = [await bus.publish("x", {"n": n}) for n in range(5)]
    assert [r["id"] for r in bus.trace_records()] == ids[2:]
    await bus.shutdown()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("EVENT_BUS_URL", "kafka://localhost", "scheme 'kafka' is not supported"),
        ("EVENT_TRACE_BUFFER", "many", "EVENT_TRACE_BUFFER must be a whole number"),
        ("EVENT_TRACE_BUFFER", "0", "EVENT_TRACE_BUFFER must be a whole number, at least 1"),
    ],
)
async def test_bad_configuration_fails_setup(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        await EventBusTool().setup()


async def test_shutdown_lets_deliveries_finish(event_bus: EventBusTool) -> None:
    release = asyncio.Event()
    finished: list[bool] = []

    async def slow(event: Event) -> None:
        await release.wait()
        finished.append(True)

    await event_bus.subscribe("x", slow)
    await event_bus.publish("x")
    # released only once shutdown is already waiting (shutdown runs up to its first await first)
    asyncio.get_running_loop().call_soon(release.set)
    await event_bus.shutdown()
    assert finished == [True]


async def test_trace_stream_replays_then_follows(event_bus: EventBusTool) -> None:
    first = await event_bus.publish("a")
    second = await event_bus.publish("b")
    records = event_bus.trace_records()
    assert [r["seq"] for r in records] == [1, 2]
    stream = event_bus.trace_stream(after=1)
    assert (await anext(stream))["id"] == second
    third = await event_bus.publish("c")
    assert (await anext(stream))["id"] == third
    await stream.aclose()
    assert first != second


async def test_shutdown_cancels_what_does_not_finish_in_time(
    event_bus: EventBusTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_bus_tool, "DRAIN_SECONDS", 0.01)

    async def stuck(event: Event) -> None:
        await asyncio.Event().wait()

    await event_bus.subscribe("x", stuck)
    await event_bus.publish("x")
    await event_bus.shutdown()
    [record] = event_bus.trace_records()
    assert record["subscribers"][0]["outcome"] == "cancelled"


# -- through the kernel ----------------------------------------------------------------------------------


async def test_a_plugin_unloaded_by_the_kernel_loses_its_subscriptions(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("event_bus",))
    write(
        root,
        "domains/shop/plugins/orders.py",
        """
        from core import BasePlugin

        class Orders(BasePlugin):
            def __init__(self, event_bus):
                self.event_bus = event_bus
                self.seen = []

            async def on_boot(self):
                await self.event_bus.subscribe("order.created", self.on_created)

            async def on_created(self, event):
                self.seen.append(event.payload)
        """,
    )
    async with booted(root) as kernel:
        bus = kernel.container.get("event_bus")
        assert [(s["subscriber"], s["owner"]) for s in bus.subscriptions()] == [
            ("shop.Orders.on_created", "shop.Orders")
        ]
        await kernel.unload_plugin("shop.Orders")
        assert bus.subscriptions() == []


async def test_in_flight_counts_each_delivery_until_it_finishes(event_bus: EventBusTool) -> None:
    release = asyncio.Event()
    all_started = asyncio.Event()
    started: list[str] = []

    def blocked(tag: str) -> Any:
        async def handler(event: Event) -> None:
            started.append(tag)
            if len(started) == 4:
                all_started.set()
            await release.wait()

        return handler

    for tag in ("a", "b", "c"):
        await event_bus.subscribe("many", blocked(tag))
    await event_bus.subscribe("one", blocked("solo"))
    await event_bus.publish("many")
    await event_bus.publish("one")
    async with asyncio.timeout(5):
        await all_started.wait()
    assert event_bus.stats()["in_flight"] == 4
    release.set()
    records = await completed(event_bus, 2)
    # a delivery leaves the count in the same step that completes its record
    assert [r["complete"] for r in records] == [True, True]
    assert event_bus.stats()["in_flight"] == 0
    assert sorted(started) == ["a", "b", "c", "solo"]
