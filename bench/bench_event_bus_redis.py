"""Events/s on the Redis bus against the same work done with pipelined redis-py, in one process.

Run: ``.venv/bin/python bench/bench_event_bus_redis.py``   (about 15 s; needs Redis at
``REDIS_URL_TEST`` or ``redis://127.0.0.1:6379/0``)

One group with one async subscriber; ``EVENTS`` events are published in batches of 100 (one
``publish_many`` each, the bus's batch ``XADD``; and, reported beside it, 100 ``publish`` calls
under one ``gather``, which costs a task per event) and timed from the first publish until the
last acknowledgement (the bus's ``delivered`` counter).
The floor does what any consumer group must: ``XADD`` each batch in one pipeline, a reader
task doing ``XREADGROUP COUNT 128``, calling the handler on each entry and acknowledging every
batch it read with one ``XACK``. The bus additionally checks and encodes payloads (each entry's
values packed in one field), de-duplicates by event id (one ``MGET`` of the handled marks per read
before, the marks' ``SET ... PX`` and the ``XACK`` in one script call per batch after), counts
retries and keeps the trace. Ratio = bus events/s / floor events/s (goal >= 0.7); medians of
interleaved rounds.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis.asyncio as aioredis  # noqa: E402

from bench._redis_bus import URL, bus_rate, delete_prefixed  # noqa: E402
from bench._util import emit, emit_ratio  # noqa: E402

EVENTS, BATCH, ROUNDS = 10_000, 100, 7


async def floor_rate() -> float:
    prefix = f"keel-bench-raw-{uuid.uuid4().hex[:8]}:"
    stream = f"{prefix}stream"
    client = aioredis.Redis.from_url(URL, decode_responses=True)
    reader_client = aioredis.Redis.from_url(URL, decode_responses=True)
    await client.xgroup_create(stream, "bench", id="$", mkstream=True)
    acked = 0
    done = asyncio.Event()
    seen = 0

    async def handler(payload: Any) -> None:
        nonlocal seen
        seen += 1

    async def reader() -> None:
        nonlocal acked
        while acked < EVENTS:
            response: Any = await reader_client.xreadgroup(
                "bench", "c1", {stream: ">"}, count=128, block=1000
            )
            for _, entries in response or ():
                for _, fields in entries:
                    await handler(json.loads(fields["payload"]))
                await reader_client.xack(stream, "bench", *(entry_id for entry_id, _ in entries))
                acked += len(entries)
        done.set()

    task = asyncio.create_task(reader())
    try:
        started = time.perf_counter()
        for start in range(0, EVENTS, BATCH):
            pipe = client.pipeline(transaction=False)
            for n in range(start, start + BATCH):
                pipe.xadd(stream, {"name": "bench.tick", "payload": json.dumps({"n": n})})
            await pipe.execute()
        await done.wait()
        return EVENTS / (time.perf_counter() - started)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await delete_prefixed(client, prefix)
        await client.aclose()
        await reader_client.aclose()


async def main() -> None:
    bus: list[float] = []
    gathered: list[float] = []
    floor: list[float] = []
    for round_ in range(ROUNDS):
        trio = [
            (floor, floor_rate),
            (bus, lambda: bus_rate(EVENTS, BATCH)),
            (gathered, lambda: bus_rate(EVENTS, BATCH, gathered=True)),
        ]
        for samples, measure in trio if round_ % 2 == 0 else reversed(trio):
            samples.append(await measure())
    b, g, f = statistics.median(bus), statistics.median(gathered), statistics.median(floor)
    emit("event_bus_redis_rate", b, "events/s")
    emit("event_bus_redis_rate_range_low", min(bus), "events/s")
    emit("event_bus_redis_rate_range_high", max(bus), "events/s")
    emit("event_bus_redis_pipelined_redis_py_rate", f, "events/s")
    floor_text = f"pipelined redis-py XADD / XREADGROUP COUNT 128 / XACK per batch, {f:.4g} events/s"
    emit_ratio("event_bus_redis_ratio", b / f, floor_text, ">= 0.7x")
    emit("event_bus_redis_gathered_publish_rate", g, "events/s")
    emit_ratio(
        "event_bus_redis_gathered_publish_ratio", g / f, floor_text, "none (publish per event, for reference)"
    )


if __name__ == "__main__":
    asyncio.run(main())
