"""What the in-process event bus costs against the bare minimum: one ``create_task`` per delivery.

Run: ``.venv/bin/python bench/bench_event_bus.py``   (about 15 s)

1. Throughput: events published in batches of 100 (the publisher yields to the loop between
   batches) to 1 and to 10 async subscribers, timed from the first publish until the last
   delivery; events/s. The baseline does the least a task-per-delivery bus must do — a bare
   ``loop.create_task(handler(payload))`` per subscriber per event, nothing else (no set holding
   the tasks, no done-callback). The bus additionally checks and
   freezes the payload, gives the event an id and parent, sets the context variables around each
   subscriber, isolates failures and writes the trace record. The bus is called through the
   ToolProxy, as a plugin calls it; ``..._direct`` figures skip the proxy.
2. Latency: one event at a time (publish, wait until the subscriber has run), p50 and p99 of
   the time from the publish call to the start of the subscriber, against the same baseline.

Configurations are interleaved round by round and the median of the rounds is taken, in each of
``PROCESSES`` fresh processes; each figure printed is the median over the processes (with their
range). A ratio is bus events/s divided by baseline events/s (goal >= 0.6 with one subscriber,
>= 0.9 with ten).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._util import CHILD_FLAG, across_processes, emit, emit_ratio  # noqa: E402
from core import Kernel  # noqa: E402

ROUNDS = 7
PROCESSES = 5
EVENTS = {1: 20_000, 10: 4_000}
BATCH = 100
LATENCY_EVENTS = 3_000


async def boot_bus() -> tuple[Kernel, Any, Any]:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-bus-"))
    (root / "tools" / "event_bus").mkdir(parents=True)
    for source in (ROOT / "tools" / "event_bus").glob("*.py"):  # per file: rglob skips linked folders
        (root / "tools" / "event_bus" / source.name).symlink_to(source)
    kernel = Kernel(root)
    await kernel.boot(plugins=False)
    return kernel, kernel.container.get("event_bus"), kernel.container.get_raw_tools()["event_bus"]


class Sink:
    """Counts deliveries and wakes the benchmark when the expected number arrived."""

    def __init__(self) -> None:
        self.count = 0
        self.target = 0
        self.done = asyncio.Event()
        self.started: list[float] = []

    def expect(self, target: int) -> None:
        self.count, self.target = 0, target
        self.done.clear()

    def hit(self) -> None:
        self.count += 1
        if self.count == self.target:
            self.done.set()


async def throughput_bus(bus: Any, sink: Sink, events: int, subscribers: int) -> float:
    sink.expect(events * subscribers)
    publish = bus.publish
    started = time.perf_counter()
    for first in range(0, events, BATCH):
        for i in range(first, first + BATCH):
            await publish("bench.tick", {"i": i})
        await asyncio.sleep(0)
    await sink.done.wait()
    return events / (time.perf_counter() - started)


async def throughput_bare(
    handlers: Sequence[Callable[[Any], Coroutine[Any, Any, None]]], sink: Sink, events: int
) -> float:
    sink.expect(events * len(handlers))
    create_task = asyncio.get_running_loop().create_task
    started = time.perf_counter()
    for first in range(0, events, BATCH):
        for i in range(first, first + BATCH):
            payload = {"i": i}
            for handler in handlers:
                create_task(handler(payload))  # nothing else: no set, no done-callback
        await asyncio.sleep(0)
    await sink.done.wait()
    return events / (time.perf_counter() - started)


async def latency(send: Callable[[float], Awaitable[None]], sink: Sink) -> list[float]:
    samples = []
    for _ in range(LATENCY_EVENTS):
        sink.expect(1)
        sink.started.clear()
        published = time.perf_counter()
        await send(published)
        await sink.done.wait()
        samples.append((sink.started[0] - published) * 1e6)
    return samples


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    kernel, proxy, direct = await boot_bus()
    sink = Sink()

    def make_subscriber() -> Callable[[Any], Awaitable[None]]:
        async def on_tick(event: Any) -> None:
            sink.hit()

        return on_tick

    async def on_tick_bare(payload: Any) -> None:
        sink.hit()

    try:
        for subscribers in (1, 10):
            subs = [make_subscriber() for _ in range(subscribers)]  # distinct, so each is subscribed
            for sub in subs:
                await proxy.subscribe("bench.tick", sub)
            bare = [on_tick_bare] * subscribers
            events = EVENTS[subscribers]
            results: dict[str, list[float]] = {"bus": [], "direct": [], "bare": []}
            for _ in range(ROUNDS):
                results["bare"].append(await throughput_bare(bare, sink, events))
                results["bus"].append(await throughput_bus(proxy, sink, events, subscribers))
                results["direct"].append(await throughput_bus(direct, sink, events, subscribers))
            bus, direct_rate, bare_rate = (statistics.median(results[k]) for k in ("bus", "direct", "bare"))
            emit(f"event_bus_{subscribers}sub_rate", bus, "events/s")
            emit(f"event_bus_{subscribers}sub_rate_direct", direct_rate, "events/s")
            emit(f"event_bus_{subscribers}sub_bare_create_task_rate", bare_rate, "events/s")
            floor = f"a bare create_task per event and subscriber, {bare_rate:.4g} events/s"
            goal = ">= 0.6x" if subscribers == 1 else ">= 0.9x"
            emit_ratio(f"event_bus_{subscribers}sub_ratio", bus / bare_rate, floor, goal)
            emit_ratio(f"event_bus_{subscribers}sub_ratio_direct", direct_rate / bare_rate, floor, goal)
            for sub in subs:
                await proxy.unsubscribe("bench.tick", sub)

        async def on_probe(event: Any) -> None:
            sink.started.append(time.perf_counter())
            sink.hit()

        async def on_probe_bare(payload: Any) -> None:
            sink.started.append(time.perf_counter())
            sink.hit()

        await proxy.subscribe("bench.probe", on_probe)
        loop = asyncio.get_running_loop()

        async def send_bus(t: float) -> None:
            await proxy.publish("bench.probe", {"t": t})

        async def send_bare(t: float) -> None:
            loop.create_task(on_probe_bare({"t": t}))

        bus_lat: list[float] = []
        bare_lat: list[float] = []
        for _ in range(3):
            bare_lat += await latency(send_bare, sink)
            bus_lat += await latency(send_bus, sink)
        emit("event_bus_latency_p50", p(bus_lat, 0.5), "us")
        emit("event_bus_latency_p99", p(bus_lat, 0.99), "us")
        emit("event_bus_bare_create_task_latency_p50", p(bare_lat, 0.5), "us")
        emit("event_bus_bare_create_task_latency_p99", p(bare_lat, 0.99), "us")
    finally:
        await kernel.shutdown()


if __name__ == "__main__":
    if os.environ.get(CHILD_FLAG):
        asyncio.run(main())
    else:
        across_processes(Path(__file__), PROCESSES)
