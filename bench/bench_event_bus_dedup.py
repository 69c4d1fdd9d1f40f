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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from bench._redis_bus import bus_rate  # noqa: E402
from bench._util import emit  # noqa: E402

EVENTS, BATCH, ROUNDS = 3000, 100, 3


async def run(dedupe_ttl: int) -> float:
    return await bus_rate(EVENTS, BATCH, EVENT_BUS_DEDUP_TTL_SECONDS=str(dedupe_ttl))


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
