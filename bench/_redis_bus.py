"""The Redis bus measured end to end, shared by the benchmarks that compare it with a floor or with itself.

A run publishes ``events`` events in batches of ``batch`` and is timed from the first publish until the
bus has acknowledged the last delivery (its ``delivered`` counter), so what is measured is what a
subscriber sees, not how fast ``publish`` returns.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import redis.asyncio as aioredis

from tools.event_bus.event_bus_tool import EventBusTool

URL = os.environ.get("REDIS_URL_TEST", "redis://127.0.0.1:6379/0")


async def delete_prefixed(client: Any, prefix: str) -> None:
    """Drop every key a run left under its prefix, in chunks a single DEL can take."""
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
    for i in range(0, len(keys), 500):
        await client.delete(*keys[i : i + 500])


async def bus_rate(events: int, batch: int, *, gathered: bool = False, **settings: str) -> float:
    """Events/s through one group with one async subscriber; ``settings`` are extra bus settings.

    Each batch is one ``publish_many`` (one pipeline of ``XADD``, as the floor sends), or with
    ``gathered`` that many ``publish`` calls under one ``gather`` (a task each)."""
    prefix = f"keel-bench-{uuid.uuid4().hex[:8]}:"
    os.environ.update(EVENT_BUS_URL=URL, EVENT_BUS_PREFIX=prefix, **settings)
    bus = EventBusTool()
    await bus.setup()
    seen = 0
    all_seen = asyncio.Event()

    async def handler(event: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == events:
            all_seen.set()

    try:
        await bus.subscribe("bench.tick", handler, group="bench")
        started = time.perf_counter()
        for start in range(0, events, batch):
            if gathered:
                await asyncio.gather(
                    *(bus.publish("bench.tick", {"n": n}) for n in range(start, start + batch))
                )
            else:
                await bus.publish_many("bench.tick", [{"n": n} for n in range(start, start + batch)])
        await all_seen.wait()  # no polling while the events flow: it would tax the bus alone
        broker: Any = bus._broker
        while broker.counters["delivered"] < events:  # noqa: ASYNC110 - acks are counted, not signalled
            await asyncio.sleep(0.001)
        return events / (time.perf_counter() - started)
    finally:
        await bus.shutdown()
        client = aioredis.Redis.from_url(URL)
        await delete_prefixed(client, prefix)
        await client.aclose()
