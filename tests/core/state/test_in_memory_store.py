"""InMemoryStore: the full StorePort, with TTL on an injected clock and integer-only counters."""

from __future__ import annotations

import asyncio

import pytest

from core.contracts.errors import KeelError, StoreValueError
from core.contracts.ports import StorePort
from core.contracts.types import Scope
from core.state.stores import InMemoryStore
from core.testing import FakeClock


def test_satisfies_the_port() -> None:
    assert isinstance(InMemoryStore(), StorePort)


async def test_get_set_delete() -> None:
    store = InMemoryStore()
    assert await store.get("k") is None
    await store.set("k", {"a": [1, 2]})
    assert await store.get("k") == {"a": [1, 2]}
    await store.delete("k")
    await store.delete("k")  # idempotent
    assert await store.get("k") is None


async def test_scopes_keep_the_same_key_apart() -> None:
    store = InMemoryStore()
    await store.set("k", 1, scope=Scope(1, 1))
    await store.set("k", 2, scope=Scope(2, 1))
    assert await store.get("k", scope=Scope(1, 1)) == 1
    assert await store.get("k", scope=Scope(2, 1)) == 2
    assert await store.get("k") is None
    await store.set("k", 0, scope=None)
    assert await store.get("k", scope=Scope()) == 0  # None is the zero tenant


async def test_values_are_snapshots_both_ways() -> None:
    store = InMemoryStore()
    value = {"items": [1]}
    await store.set("k", value)
    value["items"].append(2)  # the writer keeps editing its dict
    read = await store.get("k")
    assert read == {"items": [1]}
    read["items"].append(3)  # a reader edits its copy
    assert await store.get("k") == {"items": [1]}


async def test_ttl_expires_on_the_injected_clock() -> None:
    clock = FakeClock()
    store = InMemoryStore(clock=clock)
    await store.set("k", "v", ttl=10)
    clock.advance(9.9)
    assert await store.get("k") == "v"
    clock.advance(0.1)
    assert await store.get("k") is None


@pytest.mark.parametrize("ttl", [0, -1, True])
async def test_a_ttl_must_be_positive(ttl: float) -> None:
    with pytest.raises(ValueError):
        await InMemoryStore().set("k", 1, ttl=ttl)


async def test_get_or_set_is_single_flight() -> None:
    store = InMemoryStore()
    started, release = asyncio.Event(), asyncio.Event()
    runs = 0

    async def produce() -> str:
        nonlocal runs
        runs += 1
        started.set()
        await release.wait()
        return "value"

    tasks = [asyncio.create_task(store.get_or_set("k", produce)) for _ in range(5)]
    await started.wait()  # the first producer runs; the other four are queued behind it
    release.set()
    assert await asyncio.gather(*tasks) == ["value"] * 5
    assert runs == 1
    assert await store.get_or_set("k", produce) == "value" and runs == 1


async def test_get_or_set_never_stores_a_failure() -> None:
    store = InMemoryStore()

    async def fail() -> str:
        raise ConnectionError("provider down")

    async def succeed() -> str:
        return "ok"

    with pytest.raises(ConnectionError):
        await store.get_or_set("k", fail)
    assert await store.get("k") is None
    assert await store.get_or_set("k", succeed) == "ok"
    assert await store.get("k") == "ok"


async def test_get_or_set_honours_ttl_and_scope() -> None:
    clock = FakeClock()
    store = InMemoryStore(clock=clock)
    calls = 0

    async def produce() -> int:
        nonlocal calls
        calls += 1
        return calls

    assert await store.get_or_set("k", produce, ttl=5, scope=Scope(1, 1)) == 1
    assert await store.get_or_set("k", produce, ttl=5, scope=Scope(2, 2)) == 2
    assert await store.get_or_set("k", produce, ttl=5, scope=Scope(1, 1)) == 1
    clock.advance(5)
    assert await store.get_or_set("k", produce, ttl=5, scope=Scope(1, 1)) == 3


async def test_append_and_list() -> None:
    store = InMemoryStore()
    assert await store.list("log") == []
    await store.append("log", {"n": 1})
    await store.append("log", {"n": 2})
    listed = await store.list("log")
    assert listed == [{"n": 1}, {"n": 2}]
    listed.append("mine")
    assert len(await store.list("log")) == 2


async def test_append_or_list_on_a_non_list_is_a_store_value_error() -> None:
    store = InMemoryStore()
    await store.set("doc", {"a": 1})
    with pytest.raises(StoreValueError, match="not a list"):
        await store.append("doc", 1)
    with pytest.raises(StoreValueError, match="not a list"):
        await store.list("doc")


async def test_increment_counts_from_zero() -> None:
    store = InMemoryStore()
    assert await store.increment("hits") == 1
    assert await store.increment("hits", 5) == 6
    assert await store.increment("hits", -2) == 4
    assert await store.get("hits") == 4


@pytest.mark.parametrize("by", [1.0, 2.5, True, "1", None])
async def test_increment_refuses_an_amount_that_is_not_an_int(by: object) -> None:
    store = InMemoryStore()
    with pytest.raises(StoreValueError) as info:
        await store.increment("hits", by)  # type: ignore[arg-type]
    assert isinstance(info.value, KeelError) and info.value.key == "hits" and info.value.amount == by
    assert await store.get("hits") is None


@pytest.mark.parametrize("held", [{"a": 1}, "12", None, 1.5, True, [1]])
async def test_increment_refuses_a_key_that_holds_a_non_integer(held: object) -> None:
    store = InMemoryStore()
    await store.set("k", held)
    with pytest.raises(StoreValueError, match="not an integer"):
        await store.increment("k")
    assert await store.get("k") == held


async def test_increment_ttl_applies_when_the_counter_is_created() -> None:
    clock = FakeClock()
    store = InMemoryStore(clock=clock)
    assert await store.increment("rate", 1, ttl=60) == 1
    clock.advance(30)
    assert await store.increment("rate", 1, ttl=60) == 2  # the window is not extended
    clock.advance(30)
    assert await store.increment("rate", 1, ttl=60) == 1  # a new window
