"""KeyedLock: one holder per key at a time, other keys unaffected, and no entry left behind."""

from __future__ import annotations

import asyncio

from core.execution import KeyedLock


async def test_one_holder_per_key_and_nothing_left_behind() -> None:
    locks = KeyedLock()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def holder(key: str, name: str, wait: bool) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            if wait:
                first_in.set()
                await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(holder("a", "first", True))
    await first_in.wait()
    second = asyncio.create_task(holder("a", "second", False))
    await holder("b", "other", False)  # another key does not wait for "a"
    assert order == ["first in", "other in", "other out"]
    assert len(locks) == 1
    release.set()
    await asyncio.gather(first, second)
    assert order[3:] == ["first out", "second in", "second out"]
    assert len(locks) == 0


async def test_a_failing_holder_releases_its_key() -> None:
    locks = KeyedLock()
    try:
        async with locks.hold("k"):
            raise ValueError("boom")
    except ValueError:
        pass
    assert len(locks) == 0
    async with locks.hold("k"):
        assert len(locks) == 1
