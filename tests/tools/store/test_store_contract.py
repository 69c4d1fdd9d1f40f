"""The StorePort contract, run against every backend: the reference InMemoryStore and the ``store``
tool on memory, SQLite, PostgreSQL and Redis. One suite, so a behaviour is the same everywhere."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.contracts.errors import StoreValueError
from core.contracts.ports import StorePort
from core.contracts.types import Scope
from tests.tools.store.conftest import StoreUnderTest

DOCUMENTS: list[Any] = [
    {"name": "Ada", "tags": ["x", "y"], "nested": {"n": 1, "ok": True, "none": None}},
    [1, "two", 3.5, False, None, {"k": []}],
    "plain text with üñíçødé",
    42,
    -7,
    2.5,
    True,
    12345678901234567890,
]


async def test_it_is_a_store_port(subject: StoreUnderTest) -> None:
    assert isinstance(subject.store, StorePort)


async def test_a_missing_key_reads_as_none(subject: StoreUnderTest) -> None:
    assert await subject.store.get("missing") is None


@pytest.mark.parametrize("value", DOCUMENTS)
async def test_json_documents_round_trip(subject: StoreUnderTest, value: Any) -> None:
    await subject.store.set("doc", value)
    assert await subject.store.get("doc") == value


async def test_values_are_snapshots_on_the_way_in_and_out(subject: StoreUnderTest) -> None:
    store = subject.store
    original = {"items": [1, 2]}
    await store.set("snap", original)
    original["items"].append(3)
    read = await store.get("snap")
    assert read == {"items": [1, 2]}
    read["items"].append(99)  # a reader gets an editable copy, not the stored value
    assert await store.get("snap") == {"items": [1, 2]}


async def test_set_replaces_and_delete_forgets(subject: StoreUnderTest) -> None:
    store = subject.store
    await store.set("k", 1)
    await store.set("k", {"now": "a dict"})
    assert await store.get("k") == {"now": "a dict"}
    await store.delete("k")
    assert await store.get("k") is None
    await store.delete("k")  # deleting what is not there is fine


async def test_scopes_partition_keys(subject: StoreUnderTest) -> None:
    store = subject.store
    a, b = Scope(org_id=1), Scope(org_id=2, domain_id=3)
    await store.set("shared", "zero")
    await store.set("shared", "a", scope=a)
    await store.set("shared", "b", scope=b)
    assert await store.get("shared") == "zero"
    assert await store.get("shared", scope=Scope()) == "zero"
    assert await store.get("shared", scope=a) == "a"
    assert await store.get("shared", scope=b) == "b"
    await store.delete("shared", scope=a)
    assert await store.get("shared", scope=a) is None and await store.get("shared", scope=b) == "b"
    await store.append("log", 1, scope=a)
    assert await store.list("log") == [] and await store.list("log", scope=a) == [1]
    assert await store.increment("n", 5, scope=b) == 5 and await store.increment("n") == 1


async def test_an_entry_expires_after_its_ttl(subject: StoreUnderTest) -> None:
    store = subject.store
    await store.set("short", "v", ttl=0.4)
    await store.set("forever", "v")
    assert await store.get("short") == "v"
    await subject.advance(0.5)
    assert await store.get("short") is None
    assert await store.get("forever") == "v"
    await store.set("short", "again")  # an expired key is simply missing: it can be written again
    assert await store.get("short") == "again"


@pytest.mark.parametrize("ttl", [0, -1, -0.5, True])
async def test_a_ttl_must_be_a_positive_number(subject: StoreUnderTest, ttl: Any) -> None:
    store = subject.store
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        await store.set("k", 1, ttl=ttl)
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        await store.increment("n", ttl=ttl)

    async def produce() -> int:
        return 1

    with pytest.raises(ValueError, match="ttl must be a positive number"):
        await store.get_or_set("k", produce, ttl=ttl)
    assert await store.get("k") is None


async def test_get_or_set_produces_once_and_then_reads(subject: StoreUnderTest) -> None:
    store = subject.store
    calls = 0

    async def produce() -> dict[str, int]:
        nonlocal calls
        calls += 1
        return {"answer": 42}

    assert await store.get_or_set("memo", produce) == {"answer": 42}
    assert await store.get_or_set("memo", produce) == {"answer": 42}
    assert calls == 1
    assert await store.get("memo") == {"answer": 42}


async def test_get_or_set_treats_a_stored_null_as_present(subject: StoreUnderTest) -> None:
    store = subject.store
    await store.set("nothing", None)

    async def produce() -> str:
        raise AssertionError("a stored null is a value: the producer must not run")

    assert await store.get_or_set("nothing", produce) is None


async def test_get_or_set_never_stores_a_failed_producer(subject: StoreUnderTest) -> None:
    store = subject.store

    async def fail() -> int:
        raise RuntimeError("producer broke")

    async def succeed() -> int:
        return 7

    with pytest.raises(RuntimeError, match="producer broke"):
        await store.get_or_set("k", fail)
    assert await store.get("k") is None
    assert await store.get_or_set("k", succeed) == 7


async def test_get_or_set_is_single_flight_per_key(subject: StoreUnderTest) -> None:
    store = subject.store
    started = asyncio.Event()
    release = asyncio.Event()
    calls = 0

    async def slow() -> str:
        nonlocal calls
        calls += 1
        started.set()
        await release.wait()
        return "once"

    first = asyncio.create_task(store.get_or_set("flight", slow))
    await started.wait()
    others = [asyncio.create_task(store.get_or_set("flight", slow)) for _ in range(4)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(first, *others) == ["once"] * 5
    assert calls == 1


async def test_get_or_set_with_a_ttl_produces_again_after_expiry(subject: StoreUnderTest) -> None:
    store = subject.store
    values = iter(["first", "second"])

    async def produce() -> str:
        return next(values)

    assert await store.get_or_set("rolling", produce, ttl=0.4) == "first"
    assert await store.get_or_set("rolling", produce, ttl=0.4) == "first"
    await subject.advance(0.5)
    assert await store.get_or_set("rolling", produce, ttl=0.4) == "second"


async def test_lists_append_in_order(subject: StoreUnderTest) -> None:
    store = subject.store
    assert await store.list("log") == []
    for item in ({"step": 1}, "two", 3, None, [4]):
        await store.append("log", item)
    assert await store.list("log") == [{"step": 1}, "two", 3, None, [4]]
    assert await store.get("log") == [{"step": 1}, "two", 3, None, [4]]


async def test_a_list_that_was_set_can_be_appended_to(subject: StoreUnderTest) -> None:
    store = subject.store
    await store.set("seeded", [1])
    await store.append("seeded", 2)
    await store.set("empty", [])
    await store.append("empty", "first")
    assert await store.list("seeded") == [1, 2]
    assert await store.list("empty") == ["first"]


@pytest.mark.parametrize("held", [{"a": 1}, "text", 5, None])
async def test_lists_refuse_a_key_holding_something_else(subject: StoreUnderTest, held: Any) -> None:
    store = subject.store
    await store.set("thing", held)
    with pytest.raises(StoreValueError) as appending:
        await store.append("thing", 1)
    assert str(appending.value) == "cannot append to 'thing': it holds a value that is not a list"
    with pytest.raises(StoreValueError) as listing:
        await store.list("thing")
    assert str(listing.value) == "cannot list 'thing': it holds a value that is not a list"
    assert appending.value.key == "thing"
    assert await store.get("thing") == held


async def test_append_keeps_the_expiry_of_the_list(subject: StoreUnderTest) -> None:
    store = subject.store
    await store.set("window", ["a"], ttl=0.4)
    await store.append("window", "b")
    assert await store.list("window") == ["a", "b"]
    await subject.advance(0.5)
    assert await store.list("window") == []


async def test_counters_count_from_zero(subject: StoreUnderTest) -> None:
    store = subject.store
    assert await store.increment("hits") == 1
    assert await store.increment("hits", 10) == 11
    assert await store.increment("hits", -12) == -1
    assert await store.get("hits") == -1
    await store.set("preset", 40)
    assert await store.increment("preset", 2) == 42
    assert await store.increment("big", 2**62) == 2**62


@pytest.mark.parametrize("amount", [True, 2.0, 1.5, "1", None])
async def test_increment_refuses_an_amount_that_is_not_an_int(subject: StoreUnderTest, amount: Any) -> None:
    store = subject.store
    with pytest.raises(StoreValueError) as caught:
        await store.increment("n", amount)
    assert str(caught.value) == str(StoreValueError.bad_amount("n", amount))
    assert caught.value.amount == amount if amount is not None else caught.value.amount is None
    assert await store.get("n") is None


@pytest.mark.parametrize("held", [{"count": 1}, "5", 2.0, True, None, [1]])
async def test_increment_refuses_a_key_that_is_not_a_counter(subject: StoreUnderTest, held: Any) -> None:
    store = subject.store
    await store.set("n", held)
    with pytest.raises(StoreValueError) as caught:
        await store.increment("n")
    assert str(caught.value) == "cannot increment 'n': it holds a value that is not an integer"
    assert await store.get("n") == held


async def test_a_counter_takes_its_ttl_when_created_and_keeps_it(subject: StoreUnderTest) -> None:
    store = subject.store
    assert await store.increment("window", ttl=0.4) == 1
    await subject.advance(0.2)
    assert await store.increment("window", ttl=100) == 2  # a later ttl does not extend the window
    await subject.advance(0.3)
    assert await store.get("window") is None
    assert await store.increment("window", ttl=0.4) == 1  # a new window starts


async def test_concurrent_increments_are_not_lost(subject: StoreUnderTest) -> None:
    store = subject.store
    results = await asyncio.gather(*(store.increment("race") for _ in range(25)))
    assert sorted(results) == list(range(1, 26))
    assert await store.get("race") == 25


async def test_concurrent_appends_are_not_lost(subject: StoreUnderTest) -> None:
    store = subject.store
    await asyncio.gather(*(store.append("items", n) for n in range(20)))
    assert sorted(await store.list("items")) == list(range(20))
