"""Events/s on the Redis bus with de-duplication by event id on (the default) and off.

Run: ``.venv/bin/python bench/bench_event_bus_dedup.py``   (about 20 s; needs Redis at
``REDIS_URL_TEST`` or ``redis://127.0.0.1:6379/0``)

One bus, one group with one async subscriber; ``EVENTS`` events are published in batches of 100
and timed from the first publish until the last acknowledgement. De-duplication adds, per
delivery, one ``EXISTS`` before the handler and one ``SET ... PX`` next to the ``XACK`` (both
pipelined with the other deliveries' commands). The floor is the same run with
``EVENT_BUS_DEDUP_TTL_SECONDS=0``; the ratio is on / off. Best of three rounds, interleaved.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis.asyncio as aioredis  # noqa: E402

from bench._util import emit  # noqa: E402
from tools.event_bus.event_bus_tool import EventBusTool  # noqa: E402

EVENTS, BATCH, ROUNDS = 3000, 100, 3
URL = os.environ.get("REDIS_URL_TEST", "redis://127.0.0.1:6379/0")


async def run(dedupe_ttl: int) -> float:
    prefix = f"keel-bench-{uuid.uuid4().hex[:8]}:"
    os.environ.update(EVENT_BUS_URL=URL, EVENT_BUS_PREFIX=prefix, EVENT_BUS_DEDUP_TTL_SECONDS=str(dedupe_ttl))
    bus = EventBusTool()
    await bus.setup()
    seen = 0

    async def handler(event: Any) -> None:
        nonlocal seen
        seen += 1

    try:
        await bus.subscribe("bench.tick", handler, group="bench")
        started = time.perf_counter()
        for start in range(0, EVENTS, BATCH):
            await asyncio.gather(*(bus.publish("bench.tick", {"n": n}) for n in range(start, start + BATCH)))
        broker: Any = bus._broker
        while broker.counters["delivered"] < EVENTS:  # noqa: ASYNC110 - acks are counted, not signalled
            await asyncio.sleep(0.001)
        return EVENTS / (time.perf_counter() - started)
    finally:
        await bus.shutdown()
        client = aioredis.Redis.from_url(URL)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for i in range(0, len(keys), 500):
            await client.delete(*keys[i : i + 500])
        await client.aclose()


async def main() -> None:
    on: list[float] = []
    off: list[float] = []
    for _ in range(ROUNDS):
        off.append(await run(0))
        on.append(await run(86_400))
    emit("event_bus_redis_dedup_off", max(off), "events/s")
    emit("event_bus_redis_dedup_on", max(on), "events/s")
    emit("event_bus_redis_dedup_ratio", max(on) / max(off), "x")


if __name__ == "__main__":
    asyncio.run(main())
