# ruff: noqa: F811 - the fixtures imported below are parameters of the tests
"""What the Redis bus promises under faults: nothing trimmed that a group has not acknowledged (and
every hard-cap drop counted), attempt counts kept in the stream, duplicates skipped by event id,
dead letters replayed to their group alone or discarded, and each group's lag visible.

The fixtures are those of :mod:`tests.tools.event_bus.test_redis_backend` (several buses on one
loop stand for several processes).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from core.registry import Registry
from tests.tools.event_bus.test_redis_backend import (  # noqa: F401 - fixtures
    MAX_ATTEMPTS,
    Recorder,
    StartBus,
    pending,
    raw,
    redis_env,
    start_bus,
    until,
)
from tools.event_bus.event_bus_tool import EventBusTool
from tools.event_bus.events import Event


def broker(bus: EventBusTool) -> Any:
    assert bus._broker is not None
    return bus._broker


async def down_group(start_bus: StartBus, name: str, group: str, seen: Recorder) -> None:
    """A group that subscribed once and whose only process then stopped."""
    first = await start_bus()
    await first.subscribe(name, seen.handler(group), group=group)
    await first.shutdown()


# -- trimming --------------------------------------------------------------------------------------


async def test_a_group_that_was_down_gets_every_event_past_the_soft_length(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENT_BUS_STREAM_MAXLEN", "50")
    monkeypatch.setenv("EVENT_BUS_STREAM_HARD_MAXLEN", "0")
    stream = f"{redis_env[1]}stream:mail.send"
    seen = Recorder()
    await down_group(start_bus, "mail.send", "mailer", seen)
    publisher = await start_bus()
    ids = [await publisher.publish("mail.send", {"n": n}) for n in range(300)]
    await broker(publisher).trim()
    assert await raw.xlen(stream) == 300  # the group has read none of them: nothing trimmed

    later = await start_bus()
    await later.subscribe("mail.send", seen.handler("mailer"), group="mailer")
    await until(lambda: len(seen.of("mailer")) == 300)
    assert [e.id for e in seen.of("mailer")] == ids
    for _ in range(500):  # the last acknowledgements may still be on their way
        if await pending(raw, redis_env[1], "mail.send", "mailer") == 0:
            break
        await asyncio.sleep(0.01)
    assert await pending(raw, redis_env[1], "mail.send", "mailer") == 0
    await broker(publisher).trim()
    assert 1 <= await raw.xlen(stream) <= 50  # acknowledged by every group: trimmed to the soft length
    buses = (publisher, later)  # each process's maintenance trims: count them all
    assert sum(bus.stats()["broker"]["trimmed"] for bus in buses) >= 250
    assert sum(bus.stats()["broker"]["dropped_unread"] for bus in buses) == 0


async def test_the_hard_cap_drops_unread_entries_but_counts_logs_and_shows_them(
    start_bus: StartBus,
    raw: Any,
    redis_env: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("EVENT_BUS_STREAM_MAXLEN", "20")
    monkeypatch.setenv("EVENT_BUS_STREAM_HARD_MAXLEN", "100")
    seen = Recorder()
    await down_group(start_bus, "mail.send", "mailer", seen)
    registry = Registry()
    publisher = EventBusTool()
    publisher.bind(project_root=None, registry=registry)  # type: ignore[arg-type]
    await publisher.setup()
    try:
        ids = [await publisher.publish("mail.send", {"n": n}) for n in range(300)]
        with caplog.at_level(logging.ERROR, logger="keel.event_bus"):
            await broker(publisher).trim()
        assert await raw.xlen(f"{redis_env[1]}stream:mail.send") == 100
        assert publisher.stats()["broker"]["dropped_unread"] == 200
        health = registry.get_system_dump()["kernel"]["capabilities"]["event_bus"]["health"]
        assert health["dropped_unread"] == {"mail.send": 200}
        assert health["lag"]["mail.send"]["mailer"]["unread"] == 100
        logged = [r.getMessage() for r in caplog.records if "EVENT_BUS_STREAM_HARD_MAXLEN" in r.getMessage()]
        assert logged and all("groups mailer had not acknowledged" in line for line in logged)

        later = await start_bus()
        await later.subscribe("mail.send", seen.handler("mailer"), group="mailer")
        await until(lambda: len(seen.of("mailer")) == 100)
        assert [e.id for e in seen.of("mailer")] == ids[200:]
    finally:
        await publisher.shutdown()


# -- attempts counted by the stream ----------------------------------------------------------------


async def test_each_retry_is_counted_in_the_stream(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    stream = f"{redis_env[1]}stream:job.run"
    consumer = await start_bus()
    deliveries: list[int] = []

    async def flaky(event: Event) -> None:
        rows = await raw.xpending_range(stream, "jobs", min="-", max="+", count=1)
        deliveries.append(int(rows[0]["times_delivered"]))
        if len(deliveries) < MAX_ATTEMPTS:
            raise RuntimeError("not yet")

    await consumer.subscribe("job.run", flaky, group="jobs")
    publisher = await start_bus()
    await publisher.publish("job.run", {})
    await until(lambda: consumer.stats()["broker"]["delivered"] == 1)
    assert deliveries == [1, 2, 3]


async def test_a_claimed_entry_goes_on_counting_from_the_streams_delivery_count(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    stream = f"{redis_env[1]}stream:job.run"
    await raw.xgroup_create(stream, "jobs", id="$", mkstream=True)
    publisher = await start_bus()
    await publisher.publish("job.run", {})
    # A process ran it twice (its first delivery and one retry), then died.
    [[_, [(entry_id, _)]]] = await raw.xreadgroup("jobs", "ghost", {stream: ">"}, count=1)
    await raw.xclaim(stream, "jobs", "ghost", 0, [entry_id], retrycount=2, justid=True)
    runs: list[Event] = []

    async def failing(event: Event) -> None:
        runs.append(event)
        raise RuntimeError("still broken")

    survivor = await start_bus()
    await survivor.subscribe("job.run", failing, group="jobs")
    await until(lambda: survivor.stats()["broker"]["dead_lettered"] == 1, within=10)
    assert len(runs) == 1  # the claim made it delivery 3 of MAX_ATTEMPTS = 3
    [letter] = await survivor.dead_letters()
    assert letter["attempts"] == MAX_ATTEMPTS


# -- de-duplication by event id ---------------------------------------------------------------------


@pytest.mark.parametrize("dedupe", [True, False])
async def test_an_entry_appended_twice_runs_once_per_group_unless_opted_out(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str], dedupe: bool
) -> None:
    stream = f"{redis_env[1]}stream:order.paid"
    consumer = await start_bus()
    seen = Recorder()
    await consumer.subscribe("order.paid", seen.handler("billing"), group="billing", dedupe=dedupe)
    publisher = await start_bus()
    event_id = await publisher.publish("order.paid", {"order": 1})
    await until(lambda: consumer.stats()["broker"]["delivered"] == 1)
    [(_, fields)] = await raw.xrange(stream)
    await raw.xadd(stream, fields)  # what a client retry after a lost reply does
    await publisher.publish("order.paid", {"order": 2})
    await until(lambda: len({e.payload["order"] for e in seen.of("billing")}) == 2)
    counters = consumer.stats
    await until(lambda: counters()["broker"]["duplicates_skipped"] + counters()["broker"]["delivered"] == 3)
    runs_of_first = [e for e in seen.of("billing") if e.id == event_id]
    assert len(runs_of_first) == (1 if dedupe else 2)
    assert consumer.stats()["broker"]["duplicates_skipped"] == (1 if dedupe else 0)
    assert await pending(raw, redis_env[1], "order.paid", "billing") == 0


async def test_duplicates_and_new_events_read_together_are_told_apart(
    start_bus: StartBus, raw: Any, redis_env: tuple[str, str]
) -> None:
    """One read of several entries looks their marks up together: only the new one runs."""
    stream = f"{redis_env[1]}stream:order.paid"
    consumer = await start_bus()
    seen = Recorder()
    await consumer.subscribe("order.paid", seen.handler("billing"), group="billing")
    publisher = await start_bus()
    first = await publisher.publish("order.paid", {"order": 1})
    second = await publisher.publish("order.paid", {"order": 2})
    await until(lambda: consumer.stats()["broker"]["delivered"] == 2)
    [(_, one), (_, two)] = await raw.xrange(stream)
    fresh = {**two, "id": f"{second}-fresh", "payload": '{"order": 3}'}
    pipe = raw.pipeline(transaction=True)  # appended at once, so read in one XREADGROUP
    for fields in (one, fresh, two):
        pipe.xadd(stream, fields)
    await pipe.execute()
    counters = consumer.stats
    await until(lambda: counters()["broker"]["duplicates_skipped"] + counters()["broker"]["delivered"] == 5)
    assert counters()["broker"]["duplicates_skipped"] == 2
    assert sorted(e.payload["order"] for e in seen.of("billing")) == [1, 2, 3]
    assert [e.id for e in seen.of("billing") if e.id == first] == [first]
    assert await pending(raw, redis_env[1], "order.paid", "billing") == 0


# -- dead letters: replay to the group alone, discard -----------------------------------------------


async def test_a_dead_letter_is_replayed_to_its_group_only_then_discarded(start_bus: StartBus) -> None:
    consumer = await start_bus()
    broken = True
    runs: list[str] = []

    async def charge(event: Event) -> None:
        runs.append("billing")
        if broken:
            raise RuntimeError("card declined")

    async def audit(event: Event) -> None:
        runs.append("audit")

    await consumer.subscribe("order.paid", charge, group="billing")
    await consumer.subscribe("order.paid", audit, group="audit")
    await consumer.publish("order.paid", {"order": 1})
    await until(lambda: consumer.stats()["broker"]["dead_lettered"] == 1)
    assert runs.count("billing") == MAX_ATTEMPTS and runs.count("audit") == 1
    [letter] = await consumer.dead_letters()

    broken = False
    assert await consumer.replay_dead_letter(letter["dead_letter_id"]) is True
    await until(lambda: runs.count("billing") == MAX_ATTEMPTS + 1)
    await until(lambda: consumer.stats()["broker"]["delivered"] == 2)
    assert runs.count("audit") == 1  # the other group acknowledged the replay without running it
    assert await consumer.dead_letters() == []
    assert await consumer.replay_dead_letter(letter["dead_letter_id"]) is False

    broken = True
    await consumer.publish("order.paid", {"order": 2})
    await until(lambda: consumer.stats()["broker"]["dead_lettered"] == 2)
    [second] = await consumer.dead_letters()
    assert await consumer.discard_dead_letter(second["dead_letter_id"]) is True
    assert await consumer.dead_letters() == []
    assert await consumer.discard_dead_letter(second["dead_letter_id"]) is False


async def test_lag_per_group_counts_what_a_stopped_group_has_not_read(start_bus: StartBus) -> None:
    seen = Recorder()
    await down_group(start_bus, "mail.send", "mailer", seen)
    publisher = await start_bus()
    for n in range(5):
        await publisher.publish("mail.send", {"n": n})
    lag = await publisher.lag()
    assert lag["mail.send"]["mailer"]["unread"] == 5
    assert lag["mail.send"]["mailer"]["pending"] == 0


# -- handling entries ------------------------------------------------------------------------------


async def test_a_waiting_handler_holds_up_no_other_entry_and_keeps_its_task(start_bus: StartBus) -> None:
    """Entries are handled inline until one waits; that one goes on in a task of its own, from
    start to end, and the entries read with it are handled meanwhile."""
    consumer = await start_bus()
    release = asyncio.Event()
    handled: list[int] = []
    tasks: dict[int, tuple[Any, Any]] = {}

    async def handler(event: Event) -> None:
        n = event.payload["n"]
        before = asyncio.current_task()
        if n == 0:
            async with asyncio.timeout(5):  # a timeout needs the same task at its start and end
                await release.wait()
        tasks[n] = (before, asyncio.current_task())
        handled.append(n)

    await consumer.subscribe("job.run", handler, group="workers")
    publisher = await start_bus()
    await asyncio.gather(*(publisher.publish("job.run", {"n": n}) for n in range(5)))
    await until(lambda: sorted(handled) == [1, 2, 3, 4])
    assert 0 not in handled
    release.set()
    await until(lambda: broker(consumer).counters["delivered"] == 5)
    assert handled[-1] == 0
    assert all(before is after for before, after in tasks.values())
