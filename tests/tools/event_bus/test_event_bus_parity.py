"""One contract, run unchanged on the in-process bus and on Redis Streams (the ``bus`` parameter):
groups, retries with backoff, dead letters (list, replay to the group alone, discard), causality,
request/reply, and lag per group.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from core.context import current_event_id_var
from tests.conftest import fresh_redis_namespace
from tools.event_bus.errors import EventPayloadError
from tools.event_bus.event_bus_tool import EventBusTool
from tools.event_bus.events import Event

MAX_ATTEMPTS = 3


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still not the case after {within}s")


@pytest.fixture(params=["memory", "redis"])
async def bus(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[EventBusTool]:
    for name in [n for n in os.environ if n.startswith("EVENT_BUS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("EVENT_BUS_MAX_ATTEMPTS", str(MAX_ATTEMPTS))
    monkeypatch.setenv("EVENT_BUS_RETRY_BACKOFF_MS", "10")
    if request.param == "memory":
        tool = EventBusTool()
        await tool.setup()
        yield tool
        await tool.shutdown()
        return
    async with fresh_redis_namespace() as (url, prefix):
        monkeypatch.setenv("EVENT_BUS_URL", url)
        monkeypatch.setenv("EVENT_BUS_PREFIX", prefix)
        monkeypatch.setenv("EVENT_BUS_CLAIM_IDLE_MS", "300")
        tool = EventBusTool()
        await tool.setup()
        yield tool
        await tool.shutdown()


async def test_every_group_receives_every_event(bus: EventBusTool) -> None:
    seen: dict[str, list[int]] = {"billing": [], "audit": []}

    async def billing(event: Event) -> None:
        seen["billing"].append(event.payload["n"])

    async def audit(event: Event) -> None:
        seen["audit"].append(event.payload["n"])

    await bus.subscribe("order.paid", billing, group="billing")
    await bus.subscribe("order.paid", audit, group="audit")
    for n in range(20):
        await bus.publish("order.paid", {"n": n})
    await until(lambda: len(seen["billing"]) == 20 and len(seen["audit"]) == 20)
    assert sorted(seen["billing"]) == sorted(seen["audit"]) == list(range(20))


async def test_a_failing_handler_is_retried_with_backoff_then_dead_lettered(bus: EventBusTool) -> None:
    runs: list[float] = []

    async def charge(event: Event) -> None:
        runs.append(time.monotonic())
        raise RuntimeError(f"card declined for order {event.payload['order']}")

    await bus.subscribe("order.paid", charge, group="billing")
    event_id = await bus.publish("order.paid", {"order": 9})
    await until(lambda: len(runs) == MAX_ATTEMPTS)
    letters: list[dict[str, Any]] = []
    for _ in range(500):
        if letters := await bus.dead_letters():
            break
        await asyncio.sleep(0.01)
    [letter] = letters
    assert runs[2] - runs[1] >= runs[1] - runs[0] >= 0.01  # the wait doubles: 10 ms, then 20 ms
    assert letter["id"] == event_id
    assert letter["name"] == "order.paid"
    assert letter["group"] == "billing"
    assert letter["attempts"] == MAX_ATTEMPTS
    assert letter["payload"] == {"order": 9}
    assert letter["failures"] == {charge.__qualname__: "RuntimeError: card declined for order 9"}
    assert letter["error"] == f"{charge.__qualname__}: RuntimeError: card declined for order 9"


async def test_a_handler_that_recovers_is_not_dead_lettered_and_only_it_runs_again(bus: EventBusTool) -> None:
    runs: list[str] = []

    async def flaky(event: Event) -> None:
        runs.append("flaky")
        if runs.count("flaky") == 1:
            raise RuntimeError("once")

    async def steady(event: Event) -> None:
        runs.append("steady")

    await bus.subscribe("job.run", flaky, group="jobs")
    await bus.subscribe("job.run", steady, group="jobs")
    await bus.publish("job.run", {})
    await until(lambda: runs.count("flaky") == 2)
    await asyncio.sleep(0)
    assert runs.count("steady") == 1
    assert await bus.dead_letters() == []


async def test_a_dead_letter_is_replayed_to_its_group_alone_or_discarded(bus: EventBusTool) -> None:
    broken = True
    runs: list[str] = []

    async def charge(event: Event) -> None:
        runs.append("billing")
        if broken:
            raise RuntimeError("card declined")

    async def audit(event: Event) -> None:
        runs.append("audit")

    await bus.subscribe("order.paid", charge, group="billing")
    await bus.subscribe("order.paid", audit, group="audit")
    await bus.publish("order.paid", {"order": 1})
    letters: list[dict[str, Any]] = []
    for _ in range(500):
        if letters := await bus.dead_letters():
            break
        await asyncio.sleep(0.01)
    [letter] = letters
    broken = False
    assert await bus.replay_dead_letter(letter["dead_letter_id"]) is True
    await until(lambda: runs.count("billing") == MAX_ATTEMPTS + 1)
    assert runs.count("audit") == 1
    assert await bus.dead_letters() == []
    assert await bus.replay_dead_letter(letter["dead_letter_id"]) is False

    broken = True
    await bus.publish("order.paid", {"order": 2})
    for _ in range(500):
        if letters := await bus.dead_letters():
            break
        await asyncio.sleep(0.01)
    [second] = letters
    assert await bus.discard_dead_letter(second["dead_letter_id"]) is True
    assert await bus.dead_letters() == []
    assert await bus.discard_dead_letter(second["dead_letter_id"]) is False


async def test_what_a_handler_publishes_has_the_handled_event_as_parent(bus: EventBusTool) -> None:
    children: list[Event] = []

    async def on_order(event: Event) -> None:
        assert current_event_id_var.get() == event.id
        await bus.publish("invoice.create", {"order": event.payload["order"]})

    async def on_invoice(event: Event) -> None:
        children.append(event)

    await bus.subscribe("order.paid", on_order, group="orders")
    await bus.subscribe("invoice.create", on_invoice, group="invoices")
    parent = await bus.publish("order.paid", {"order": 5})
    await until(lambda: len(children) == 1)
    assert children[0].parent_id == parent
    assert children[0].payload == {"order": 5}


async def test_request_is_answered(bus: EventBusTool) -> None:
    async def quote(event: Event) -> dict[str, Any]:
        return {"sku": event.payload["sku"], "price": 7}

    await bus.subscribe("price.quote", quote, group="pricing")
    assert await bus.request("price.quote", {"sku": "A"}, timeout=5) == {"sku": "A", "price": 7}


async def test_lag_names_every_group_with_what_it_has_yet_to_finish(bus: EventBusTool) -> None:
    release = asyncio.Event()

    async def slow(event: Event) -> None:
        await release.wait()

    await bus.subscribe("job.run", slow, group="workers")
    await bus.publish("job.run", {})
    try:
        for _ in range(500):
            lag = await bus.lag()
            if lag.get("job.run", {}).get("workers", {}).get("pending") == 1:
                break
            await asyncio.sleep(0.01)
        assert lag["job.run"]["workers"]["pending"] == 1
    finally:
        release.set()
    for _ in range(500):
        lag = await bus.lag()
        if lag["job.run"]["workers"]["pending"] == 0:
            break
        await asyncio.sleep(0.01)
    assert lag["job.run"]["workers"] == {**lag["job.run"]["workers"], "pending": 0, "unread": 0}


async def test_a_waiting_subscriber_holds_up_neither_others_nor_later_events(bus: EventBusTool) -> None:
    """Subscribers that finish at once and one that waits, over many events: each gets every
    event in publish order, the waiting one keeps its own task for the whole delivery (an
    ``asyncio.timeout`` it enters bounds that task), and the others finish without it."""
    release = asyncio.Event()
    quick: list[int] = []
    slow_started: list[int] = []
    slow_done: list[int] = []
    tasks: list[tuple[asyncio.Task[Any] | None, asyncio.Task[Any] | None]] = []

    async def fast(event: Event) -> None:
        quick.append(event.payload["n"])

    async def slow(event: Event) -> None:
        before = asyncio.current_task()
        slow_started.append(event.payload["n"])
        async with asyncio.timeout(5):
            await release.wait()
        tasks.append((before, asyncio.current_task()))
        slow_done.append(event.payload["n"])

    await bus.subscribe("tick", fast, group="fast")
    await bus.subscribe("tick", slow, group="slow")
    for n in range(20):
        await bus.publish("tick", {"n": n})
    await until(lambda: len(quick) == 20 and len(slow_started) >= 1)
    assert quick == list(range(20))
    assert slow_done == []
    release.set()
    await until(lambda: len(slow_done) == 20, within=10)
    assert sorted(slow_started) == list(range(20))
    assert all(before is not None and before is after for before, after in tasks)
    assert len({id(before) for before, _ in tasks}) == 20  # each delivery had a task of its own


async def test_subscribers_publishing_in_turn_do_not_starve_the_loop(bus: EventBusTool) -> None:
    """A chain of events, each published by the subscriber of the one before: other work on
    the loop still runs while it goes on."""
    hops: list[int] = []
    ticks = 0
    stop = asyncio.Event()

    async def relay(event: Event) -> None:
        hops.append(event.payload["n"])
        if not stop.is_set():
            await bus.publish("relay", {"n": event.payload["n"] + 1})

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    await bus.subscribe("relay", relay, group="relay")
    other = asyncio.create_task(ticker())
    await bus.publish("relay", {"n": 0})
    await until(lambda: len(hops) >= 50 and ticks >= 50, within=10)
    stop.set()
    await other
    assert hops[:50] == list(range(50))


_leaky: contextvars.ContextVar[int | None] = contextvars.ContextVar("leaky", default=None)


async def test_what_one_delivery_sets_in_its_context_no_other_sees(bus: EventBusTool) -> None:
    """Deliveries that share a running task (those that never wait) still each get their own
    context: a variable one sets is unset in the next."""
    seen: list[int | None] = []

    async def sets_it(event: Event) -> None:
        seen.append(_leaky.get())
        _leaky.set(event.payload["n"])

    await bus.subscribe("ctx", sets_it, group="ctx")
    await asyncio.gather(*(bus.publish("ctx", {"n": n}) for n in range(30)))
    await until(lambda: len(seen) == 30)
    assert seen == [None] * 30


async def test_publish_many_delivers_each_in_order_with_its_own_id(bus: EventBusTool) -> None:
    got: list[tuple[str, int]] = []

    async def handler(event: Event) -> None:
        got.append((event.id, event.payload["n"]))

    await bus.subscribe("batch", handler, group="batch")
    ids = await bus.publish_many("batch", [{"n": n} for n in range(250)])
    single = await bus.publish("batch", {"n": 250})
    await until(lambda: len(got) == 251)
    assert got == [*zip(ids, range(250), strict=True), (single, 250)]  # in publish order
    assert len(set(ids)) == 250 and single not in ids
    assert await bus.publish_many("batch", []) == []


async def test_publish_many_with_one_bad_payload_publishes_none(bus: EventBusTool) -> None:
    got: list[Event] = []

    async def handler(event: Event) -> None:
        got.append(event)

    await bus.subscribe("batch", handler, group="batch")
    before = bus.published
    with pytest.raises(EventPayloadError):
        await bus.publish_many("batch", [{"n": 1}, {"n": object()}])
    assert bus.published == before
    await bus.publish("batch", {"n": 2})  # what reaches the handler next is this, not the first
    await until(lambda: len(got) == 1)
    assert [e.payload["n"] for e in got] == [2]


async def test_a_subscriber_that_cancels_itself_holds_up_no_other_event(bus: EventBusTool) -> None:
    """Raising CancelledError at once (a handler re-raising a cancellation of its own) ends that
    delivery alone, though it shared its running task with the deliveries after it."""
    got: list[int] = []

    async def handler(event: Event) -> None:
        if event.payload["n"] == 0:
            raise asyncio.CancelledError
        got.append(event.payload["n"])

    await bus.subscribe("selfcancel", handler, group="selfcancel")
    await bus.publish_many("selfcancel", [{"n": n} for n in range(4)])
    await until(lambda: sorted(set(got)) == [1, 2, 3])
