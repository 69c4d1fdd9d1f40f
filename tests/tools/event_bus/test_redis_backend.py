"""The event bus over Redis Streams, against the local Redis: several buses stand for several processes.

Each bus has its own consumer name and connections, exactly as a bus in another process would;
only the event loop is shared. The multi-process tests proper are in ``tests/scale``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from core.context import bound, current_identity_var, current_plugin_var
from core.errors import ToolUnavailableError
from core.registry import Registry
from tests.conftest import fresh_redis_namespace
from tools.event_bus import redis_backend
from tools.event_bus.errors import (
    EventBusUnavailableError,
    EventNoReplyError,
    EventPayloadError,
    EventRequestTimeout,
)
from tools.event_bus.event_bus_tool import EventBusTool
from tools.event_bus.events import Event

CLAIM_IDLE_MS = 300
MAX_ATTEMPTS = 3

StartBus = Callable[[], Awaitable[EventBusTool]]


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``condition`` every 10 ms until it holds; fail after ``within`` seconds."""
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still not the case after {within}s")


@pytest.fixture
async def redis_env(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, str]]:
    """``(url, prefix)``: the bus settings every bus of the test shares, on a fresh key prefix."""
    for name in [n for n in os.environ if n.startswith("EVENT_BUS_")]:
        monkeypatch.delenv(name)
    async with fresh_redis_namespace() as (url, prefix):
        monkeypatch.setenv("EVENT_BUS_URL", url)
        monkeypatch.setenv("EVENT_BUS_PREFIX", prefix)
        monkeypatch.setenv("EVENT_BUS_CLAIM_IDLE_MS", str(CLAIM_IDLE_MS))
        monkeypatch.setenv("EVENT_BUS_RETRY_BACKOFF_MS", "10")
        monkeypatch.setenv("EVENT_BUS_MAX_ATTEMPTS", str(MAX_ATTEMPTS))
        yield url, prefix


@pytest.fixture
async def start_bus(redis_env: tuple[str, str]) -> AsyncIterator[StartBus]:
    """Start buses ("processes") on the shared settings; all are shut down afterwards."""
    started: list[EventBusTool] = []

    async def start() -> EventBusTool:
        bus = EventBusTool()
        await bus.setup()
        started.append(bus)
        return bus

    yield start
    for bus in reversed(started):
        await bus.shutdown()


@pytest.fixture
async def raw(redis_env: tuple[str, str]) -> AsyncIterator[Any]:
    """A plain Redis client, to look at (and tamper with) what the buses wrote."""
    client = aioredis.Redis.from_url(redis_env[0], decode_responses=True)
    yield client
    await client.aclose()


class Recorder:
    """Handlers that remember what they received, by group."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Event]] = []

    def handler(self, label: str) -> Callable[[Event], Awaitable[None]]:
        async def handle(event: Event) -> None:
            self.seen.append((label, event))

        handle.__qualname__ = f"Recorder.{label}"
        return handle

    def of(self, label: str) -> list[Event]:
        return [event for seen_by, event in self.seen if seen_by == label]


async def pending(raw: Any, prefix: str, name: str, group: str) -> int:
    return int((await raw.xpending(f"{prefix}stream:{name}", group))["pending"])


# -- groups ------------------------------------------------------------------------------------


async def test_each_group_receives_each_event_once_across_processes(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    a, b, c = await start_bus(), await start_bus(), await start_bus()
    seen = Recorder()
    billing, audit = seen.handler("billing"), seen.handler("audit")
    await a.subscribe("order.paid", billing, group="billing")
    await b.subscribe("order.paid", billing, group="billing")
    await c.subscribe("order.paid", audit, group="audit")

    ids = [await a.publish("order.paid", {"order": n}) for n in range(30)]

    await until(lambda: len(seen.of("billing")) >= 30 and len(seen.of("audit")) >= 30)
    assert await pending(raw, redis_env[1], "order.paid", "billing") == 0  # all acknowledged: no redelivery
    assert await pending(raw, redis_env[1], "order.paid", "audit") == 0
    assert sorted(e.id for e in seen.of("billing")) == sorted(ids)
    assert sorted(e.id for e in seen.of("audit")) == sorted(ids)
    assert [e.payload["order"] for e in seen.of("audit")] == list(range(30))


async def test_default_group_is_the_subscribing_plugin(start_bus: StartBus) -> None:
    bus = await start_bus()

    class Billing:
        keel_identity = "shop.Billing"

        async def on_paid(self, event: Event) -> None:
            return None

    async def loose(event: Event) -> None:
        return None

    with bound(current_plugin_var, "shop.Orders#staging-2"):
        await bus.subscribe("order.paid", loose)  # a reloading plugin: its group is the plugin's
    with bound(current_plugin_var, "shop.Orders"):
        await bus.subscribe("order.paid", loose)
    await bus.subscribe("order.paid", Billing().on_paid)  # at run time: the handler's plugin
    await bus.subscribe("order.refunded", loose)

    groups = {(s["event"], s["subscriber"].rsplit(".", 1)[-1]): s["group"] for s in bus.subscriptions()}
    assert groups == {
        ("order.paid", "loose"): "shop.Orders",
        ("order.paid", "on_paid"): "shop.Billing",
        ("order.refunded", "loose"): loose.__qualname__,
    }


async def test_events_wait_for_a_group_while_its_processes_are_down(start_bus: StartBus) -> None:
    first = await start_bus()
    seen = Recorder()
    await first.subscribe("mail.send", seen.handler("mailer"), group="mailer")
    await first.shutdown()
    publisher = await start_bus()
    event_id = await publisher.publish("mail.send", {"to": "ana@example.com"})
    assert seen.seen == []

    later = await start_bus()
    await later.subscribe("mail.send", seen.handler("mailer"), group="mailer")
    await until(lambda: len(seen.seen) == 1)
    assert seen.of("mailer")[0].id == event_id


async def test_an_unsubscribed_process_leaves_the_group_to_the_others(start_bus: StartBus) -> None:
    a, b = await start_bus(), await start_bus()
    seen = Recorder()
    on_a, on_b = seen.handler("a"), seen.handler("b")
    await a.subscribe("tick", on_a, group="ticks")
    await b.subscribe("tick", on_b, group="ticks")
    assert await b.unsubscribe("tick", on_b)
    for n in range(10):
        await a.publish("tick", {"n": n})
    await until(lambda: len(seen.of("a")) == 10)
    assert seen.of("b") == []


# -- what crosses the hop -------------------------------------------------------------------------


async def test_causal_ids_identity_and_payload_survive_the_hop(start_bus: StartBus) -> None:
    orders_process, shipping_process = await start_bus(), await start_bus()
    identities: list[str | None] = []

    class Orders:
        keel_identity = "shop.Orders"

        async def on_created(self, event: Event) -> None:
            identities.append(current_identity_var.get())
            await orders_process.publish("order.charged", {"order": event.payload["order"], "lines": [1, 2]})

    shipped = Recorder()
    await orders_process.subscribe("order.created", Orders().on_created)
    await shipping_process.subscribe("order.charged", shipped.handler("shipping"), group="shop.Shipping")

    with bound(current_identity_var, "shop.Checkout.submit"):
        root = await shipping_process.publish("order.created", {"order": 7})

    await until(lambda: len(shipped.seen) == 1)
    charged = shipped.of("shipping")[0]
    assert charged.parent_id == root
    assert charged.emitter == "shop.Orders.on_created"
    assert charged.payload == {"order": 7, "lines": [1, 2]}
    assert identities == ["shop.Orders.on_created"]
    with pytest.raises(TypeError):
        charged.payload["order"] = 8  # frozen, as in one process


async def test_trace_records_say_which_process_delivered_them(start_bus: StartBus) -> None:
    a, b = await start_bus(), await start_bus()
    seen = Recorder()
    await b.subscribe("ping", seen.handler("pong"), group="pong")
    event_id = await a.publish("ping", {})
    await until(lambda: len(seen.seen) == 1)
    await until(lambda: any(r["complete"] for r in b.trace_records()))
    [record] = b.trace_records()
    assert record["id"] == event_id
    assert record["process"] == {"pid": os.getpid(), "host": record["process"]["host"]}
    assert record["subscribers"][0]["outcome"] == "ok"
    assert a.trace_records() == []  # the publisher delivered nothing itself


# -- failures: retry, dead letters, claims -----------------------------------------------------


async def test_a_failing_handler_is_retried_with_backoff_then_dead_lettered(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    publisher, consumer = await start_bus(), await start_bus()
    runs: list[float] = []

    async def charge(event: Event) -> None:
        runs.append(time.monotonic())
        raise RuntimeError(f"card declined for order {event.payload['order']}")

    await consumer.subscribe("order.paid", charge, group="billing")
    event_id = await publisher.publish("order.paid", {"order": 9})
    await until(lambda: consumer.stats()["broker"]["dead_lettered"] == 1)

    assert len(runs) == MAX_ATTEMPTS
    assert runs[2] - runs[1] >= runs[1] - runs[0] >= 0.01  # the wait doubles: 10 ms, then 20 ms
    [letter] = await publisher.dead_letters()
    stream_entry = (await raw.xrange(f"{redis_env[1]}stream:order.paid"))[0]
    assert letter["id"] == event_id
    assert letter["stream_id"] == stream_entry[0]
    assert letter["group"] == "billing"
    assert letter["attempts"] == MAX_ATTEMPTS
    assert letter["error"] == f"{charge.__qualname__}: RuntimeError: card declined for order 9"
    assert letter["failures"] == {charge.__qualname__: "RuntimeError: card declined for order 9"}
    assert letter["payload"] == {"order": 9}
    assert letter["name"] == "order.paid"
    assert await pending(raw, redis_env[1], "order.paid", "billing") == 0


async def test_a_handler_that_recovers_is_acknowledged_and_only_failed_handlers_run_again(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    bus = await start_bus()
    runs = {"flaky": 0, "steady": 0}

    async def flaky(event: Event) -> None:
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            raise ConnectionError("the mail server hung up")

    async def steady(event: Event) -> None:
        runs["steady"] += 1

    await bus.subscribe("mail.send", flaky, group="mailer")
    await bus.subscribe("mail.send", steady, group="mailer")
    await bus.publish("mail.send", {})
    await until(lambda: bus.stats()["broker"]["delivered"] == 1)
    assert runs == {"flaky": 2, "steady": 1}
    assert await bus.dead_letters() == []
    assert await pending(raw, redis_env[1], "mail.send", "mailer") == 0


async def test_entries_a_dead_process_left_unacknowledged_are_claimed(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    publisher = await start_bus()
    stream = f"{redis_env[1]}stream:invoice.due"
    await raw.xgroup_create(stream, "invoices", id="$", mkstream=True)
    event_id = await publisher.publish("invoice.due", {"invoice": 1})
    # A process that read the entry and died before acknowledging it: a consumer that never answers.
    assert await raw.xreadgroup("invoices", "ghost", {stream: ">"}, count=10)
    survivor = await start_bus()
    seen = Recorder()
    await survivor.subscribe("invoice.due", seen.handler("invoices"), group="invoices")

    await until(lambda: len(seen.seen) == 1, within=CLAIM_IDLE_MS / 1000 + 5)
    assert seen.of("invoices")[0].id == event_id
    assert survivor.stats()["broker"]["claimed"] == 1
    await until(lambda: survivor.stats()["broker"]["delivered"] == 1)
    assert await pending(raw, redis_env[1], "invoice.due", "invoices") == 0


async def test_an_entry_that_keeps_killing_its_processes_is_dead_lettered_without_running(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    publisher = await start_bus()
    stream = f"{redis_env[1]}stream:poison"
    await raw.xgroup_create(stream, "victims", id="$", mkstream=True)
    await publisher.publish("poison", {})
    await raw.xreadgroup("victims", "ghost-1", {stream: ">"}, count=1)
    for n in range(2, MAX_ATTEMPTS + 2):  # claimed by one dying process after another
        await raw.xautoclaim(stream, "victims", f"ghost-{n}", 0, "0-0")
    runs: list[Event] = []

    async def victim(event: Event) -> None:
        runs.append(event)

    survivor = await start_bus()
    await survivor.subscribe("poison", victim, group="victims")
    await until(lambda: survivor.stats()["broker"]["dead_lettered"] == 1, within=CLAIM_IDLE_MS / 1000 + 5)
    assert runs == []
    [letter] = await survivor.dead_letters()
    assert letter["attempts"] == 0
    assert "delivered 5 times without being acknowledged" in letter["error"]


async def test_a_slow_handler_keeps_its_entry_from_being_claimed(start_bus: StartBus) -> None:
    a, b = await start_bus(), await start_bus()
    runs: list[str] = []

    async def slow(event: Event) -> None:
        runs.append("started")
        await asyncio.sleep(3 * CLAIM_IDLE_MS / 1000)  # the behaviour under test: outlive the idle time

    await a.subscribe("report.build", slow, group="reports")
    await b.subscribe("report.build", slow, group="reports")
    await a.publish("report.build", {})
    await until(lambda: a.stats()["broker"]["delivered"] + b.stats()["broker"]["delivered"] == 1)
    assert runs == ["started"]
    assert a.stats()["broker"]["claimed"] == b.stats()["broker"]["claimed"] == 0


async def test_a_process_that_stops_mid_handler_leaves_the_entry_to_another(
    start_bus: StartBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_backend, "DRAIN_SECONDS", 0.05)
    stopping, other = await start_bus(), await start_bus()
    handled: list[str] = []
    entered = asyncio.Event()

    async def stuck(event: Event) -> None:
        entered.set()
        await asyncio.Event().wait()

    async def fine(event: Event) -> None:
        handled.append(event.id)

    await stopping.subscribe("export", stuck, group="exports")
    event_id = await other.publish("export", {})
    async with asyncio.timeout(5):
        await entered.wait()
    await stopping.shutdown()  # its handler is cancelled; the entry stays unacknowledged
    await other.subscribe("export", fine, group="exports")
    await until(lambda: handled == [event_id], within=CLAIM_IDLE_MS / 1000 + 5)


async def test_entries_waiting_for_a_slot_when_their_process_stops_go_to_another(
    start_bus: StartBus, monkeypatch: pytest.MonkeyPatch, raw: Any, redis_env: tuple[str, str]
) -> None:
    """With one slot, one entry runs and the rest of the read wait for it; a stop then leaves all
    of them pending (none half-started, none lost), and another process handles each once."""
    monkeypatch.setattr(redis_backend, "DRAIN_SECONDS", 0.05)
    monkeypatch.setenv("EVENT_BUS_CONCURRENCY", "1")
    stopping = await start_bus()
    monkeypatch.delenv("EVENT_BUS_CONCURRENCY")
    other = await start_bus()
    entered = asyncio.Event()
    started: list[int] = []
    handled: list[int] = []

    async def stuck(event: Event) -> None:
        started.append(event.payload["n"])
        entered.set()
        await asyncio.Event().wait()

    async def fine(event: Event) -> None:
        handled.append(event.payload["n"])

    await stopping.subscribe("export", stuck, group="exports")
    await other.publish_many("export", [{"n": n} for n in range(4)])
    async with asyncio.timeout(5):
        await entered.wait()
    await stopping.shutdown()
    assert started == [0]  # the others never started: they waited for the one slot
    assert await pending(raw, redis_env[1], "export", "exports") == 4
    await other.subscribe("export", fine, group="exports")
    await until(lambda: sorted(handled) == [0, 1, 2, 3], within=CLAIM_IDLE_MS / 1000 + 5)
    await until(lambda: other.stats()["broker"]["delivered"] == 4)
    assert sorted(handled) == [0, 1, 2, 3]
    assert await pending(raw, redis_env[1], "export", "exports") == 0


# -- request/reply ------------------------------------------------------------------------------


async def test_request_is_answered_by_another_process(start_bus: StartBus) -> None:
    asking, answering = await start_bus(), await start_bus()

    async def quote(event: Event) -> dict[str, Any]:
        return {"sku": event.payload["sku"], "price": 12.5, "by": os.getpid()}

    async def no_opinion(event: Event) -> None:
        return None

    await answering.subscribe("price.quote", quote, group="pricing")
    await answering.subscribe("price.quote", no_opinion, group="audit")
    answer = await asking.request("price.quote", {"sku": "A-1"}, timeout=5)
    assert answer == {"sku": "A-1", "price": 12.5, "by": os.getpid()}


async def test_request_without_any_answer(start_bus: StartBus) -> None:
    asking, answering = await start_bus(), await start_bus()

    async def silent(event: Event) -> None:
        return None

    async def failing(event: Event) -> None:
        raise ValueError("no price list")

    late = asyncio.Event()

    async def slow(event: Event) -> str:
        await late.wait()
        return "too late"

    async def not_json(event: Event) -> Any:
        return {1, 2}

    with pytest.raises(EventNoReplyError, match="nobody subscribes to it"):
        await asking.request("price.nobody", {}, timeout=5)
    await answering.subscribe("price.silent", silent, group="a")
    await answering.subscribe("price.silent", failing, group="b")
    with pytest.raises(EventNoReplyError, match="every subscriber finished without a reply"):
        await asking.request("price.silent", {}, timeout=5)
    await answering.subscribe("price.slow", slow, group="slow")
    with pytest.raises(EventRequestTimeout):
        await asking.request("price.slow", {}, timeout=0.2)
    late.set()
    await answering.subscribe("price.odd", not_json, group="odd")
    with pytest.raises(EventPayloadError, match="set"):
        await asking.request("price.odd", {}, timeout=5)


# -- configuration, the dump, an unreachable server ---------------------------------------------


async def test_the_dump_says_the_bus_is_shared(redis_env: tuple[str, str]) -> None:
    registry = Registry()
    bus = EventBusTool()
    bus.bind(project_root=None, registry=registry)  # type: ignore[arg-type]
    await bus.setup()
    try:
        capability = registry.get_system_dump()["kernel"]["capabilities"]["event_bus"]
        assert capability["backend"] == "redis-streams"
        assert capability["shared"] is True
        assert capability["dead_letter_stream"] == f"{redis_env[1]}dead"
        assert registry.get_system_dump()["tools"]["event_bus"]["message"].startswith("redis streams at")
    finally:
        await bus.shutdown()


async def test_the_in_process_bus_says_it_is_not_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVENT_BUS_URL", raising=False)
    registry = Registry()
    bus = EventBusTool()
    bus.bind(project_root=None, registry=registry)  # type: ignore[arg-type]
    await bus.setup()
    try:
        capability = registry.get_system_dump()["kernel"]["capabilities"]["event_bus"]
        assert capability == {"backend": "in-process", "shared": False}
        assert await bus.dead_letters() == []
    finally:
        await bus.shutdown()


async def test_an_unreachable_redis_makes_the_bus_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENT_BUS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("EVENT_BUS_CONNECT_TIMEOUT", "0.5")
    bus = EventBusTool()
    try:
        with pytest.raises(EventBusUnavailableError) as raised:
            await bus.setup()
        assert isinstance(raised.value, ToolUnavailableError)
        with pytest.raises(EventBusUnavailableError):
            await bus.publish("anything", {})
        with pytest.raises(EventBusUnavailableError):
            await bus.publish_many("anything", [{}, {}])
        with pytest.raises(EventBusUnavailableError):  # the health check asks Redis too
            await bus.health_check()
    finally:
        await bus.shutdown()


async def test_the_health_check_pings_redis(start_bus: StartBus) -> None:
    bus = await start_bus()
    assert await bus.health_check() is True
    assert await EventBusTool().health_check() is True  # in-process: nothing to reach


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EVENT_BUS_CLAIM_IDLE_MS", "soon"),
        ("EVENT_BUS_MAX_ATTEMPTS", "0"),
        ("EVENT_BUS_STREAM_MAXLEN", "-1"),
        ("EVENT_BUS_STREAM_HARD_MAXLEN", "5"),
        ("EVENT_BUS_DEDUP_TTL_SECONDS", "soon"),
    ],
)
async def test_bad_settings_fail_setup(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv("EVENT_BUS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        await EventBusTool().setup()


async def test_the_concurrency_bound_hands_slots_over_in_order_and_passes_on_a_cancelled_one() -> None:
    slots = redis_backend._Slots(1)
    assert slots.take_free() and not slots.take_free()
    order: list[str] = []

    async def take(name: str) -> None:
        await slots.take()
        order.append(name)

    first = asyncio.create_task(take("first"))
    cancelled = asyncio.create_task(take("cancelled"))
    last = asyncio.create_task(take("last"))
    for _ in range(100):  # polled (bounded) until all three wait for a slot
        if len(slots._waiters) == 3:
            break
        await asyncio.sleep(0)
    assert len(slots._waiters) == 3
    slots.give()  # to "first"
    await first
    slots.give()  # to "cancelled", cancelled before it runs: the slot goes on to "last"
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    await last
    assert order == ["first", "last"]
    slots.give()
    assert slots.free == 1 and slots.take_free()
