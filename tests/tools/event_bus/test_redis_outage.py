"""The Redis bus through a Redis that goes away and comes back (a loopback relay switched off and on):
publishing fails clearly meanwhile, nothing published before is lost, and delivery resumes by itself."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable

import pytest

from tests.conftest import fresh_redis_namespace
from tests.tools.db.db_fixtures import Forwarder, target_of, through
from tools.event_bus.errors import EventBusError
from tools.event_bus.event_bus_tool import EventBusTool
from tools.event_bus.events import Event


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still not the case after {within}s")


@pytest.fixture
async def relayed_bus(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[EventBusTool, Forwarder]]:
    for name in [n for n in os.environ if n.startswith("EVENT_BUS_")]:
        monkeypatch.delenv(name)
    async with fresh_redis_namespace() as (url, prefix):
        relay = Forwarder(*target_of(url))
        await relay.start()
        monkeypatch.setenv("EVENT_BUS_URL", through(url, relay.port))
        monkeypatch.setenv("EVENT_BUS_PREFIX", prefix)
        monkeypatch.setenv("EVENT_BUS_CONNECT_TIMEOUT", "0.5")
        monkeypatch.setenv("EVENT_BUS_CLAIM_IDLE_MS", "300")
        bus = EventBusTool()
        await bus.setup()
        try:
            yield bus, relay
        finally:
            await bus.shutdown()
            await relay.stop()


async def test_a_redis_that_goes_away_and_returns(relayed_bus: tuple[EventBusTool, Forwarder]) -> None:
    bus, relay = relayed_bus
    got: list[int] = []

    async def handler(event: Event) -> None:
        got.append(event.payload["n"])

    await bus.subscribe("outage", handler, group="outage")
    await bus.publish_many("outage", [{"n": n} for n in range(3)])
    await until(lambda: sorted(got) == [0, 1, 2])

    await relay.stop()  # Redis is gone: every connection drops and no new one is accepted
    with pytest.raises(EventBusError):
        await bus.publish("outage", {"n": 99})
    with pytest.raises(EventBusError):
        await bus.publish_many("outage", [{"n": 98}, {"n": 97}])

    await relay.start()  # back, on the same address
    for _ in range(200):  # the shared connection comes back on its next command
        try:
            await bus.publish_many("outage", [{"n": 3}, {"n": 4}])
            break
        except EventBusError:
            await asyncio.sleep(0.02)
    else:
        raise AssertionError("publishing never recovered")
    await bus.publish("outage", {"n": 5})
    await until(lambda: {3, 4, 5} <= set(got))  # the reader reconnected by itself
    await until(lambda: bus.stats()["broker"]["delivered"] >= 6)  # and acknowledged
    assert sorted(got) == [0, 1, 2, 3, 4, 5]  # each once; none lost, nothing refused delivered
