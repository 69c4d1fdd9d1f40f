"""Scaling out: the event bus across two processes over Redis, and HTTP over one and two processes.

Run: ``.venv/bin/python bench/bench_scale.py``   (about 40 s; needs Redis for the first part, wrk
for the second — each part says why it skipped when its tool is missing)

1. Events. This process publishes; a second process (this script, ``consume``) subscribes with
   the ``event_bus`` tool over Redis Streams (``EVENT_BUS_URL``, ``REDIS_URL_TEST`` or the local
   server, on a fresh key prefix removed afterwards). Baseline, in the same run: the in-process
   bus, publisher and subscriber in this process. Both are driven alike: throughput publishes
   ``EVENTS`` events in concurrent batches of ``BATCH`` and counts from the first publish to the
   last delivery (events/s); latency publishes ``LATENCY_EVENTS`` events one at a time, 2 ms
   apart, and takes the time from ``publish`` (the event's timestamp) to the start of its handler
   (same host, same clock), p50 and p99. The consumer reports back through ``request`` over the
   same bus. Rounds alternate in-process and Redis; medians are printed.
2. HTTP. Two Keel processes serve ``GET /ping`` (the http tool and one plugin). ``wrk`` (two
   threads, 32 connections) loads one of them, then both: a Lua ``setup`` points each wrk thread
   at the next port, a round-robin balancer in front of the two. Runs alternate; medians printed.
   On a two-core machine wrk and the servers share the cores, so two processes cannot double the
   rate here; the figure shows what the second process adds on this machine.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench._util import emit, ensure_wrk, free_port, start_server  # noqa: E402
from tests.kit import PING_PLUGIN  # noqa: E402

ROUNDS = 3
EVENTS = 4000
BATCH = 100
LATENCY_EVENTS = 300
HTTP_ROUNDS = 3
HTTP_DURATION = "3s"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- 1. events ---------------------------------------------------------------------------------


class Tally:
    """What a subscriber saw: how many, when the first and last arrived, each one's latency."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.last = 0.0
        self.latencies: list[float] = []

    def hit(self, event: Any) -> None:
        now = time.time()
        self.count += 1
        self.last = now
        self.latencies.append(now - event.timestamp)

    def report(self) -> dict[str, Any]:
        report = {"count": self.count, "last": self.last, "latencies": self.latencies}
        self.reset()
        return report


async def new_bus(url: str, prefix: str) -> Any:
    from tools.event_bus.event_bus_tool import EventBusTool

    os.environ["EVENT_BUS_URL"] = url
    os.environ["EVENT_BUS_PREFIX"] = prefix
    bus = EventBusTool()
    await bus.setup()
    return bus


async def consume(url: str, prefix: str) -> None:
    """The subscriber process: counts ticks, reports them on request, stops when asked."""
    bus = await new_bus(url, prefix)
    tally, stop = Tally(), asyncio.Event()

    async def on_tick(event: Any) -> None:
        tally.hit(event)

    async def on_report(event: Any) -> dict[str, Any]:
        for _ in range(6000):  # up to 30 s for the expected ticks to arrive
            if tally.count >= event.payload["expect"]:
                break
            await asyncio.sleep(0.005)
        return tally.report()

    async def on_stop(event: Any) -> str:
        stop.set()
        return "stopping"

    await bus.subscribe("bench.tick", on_tick, group="bench.consumer")
    await bus.subscribe("bench.report", on_report, group="bench.report")
    await bus.subscribe("bench.stop", on_stop, group="bench.stop")
    print("ready", flush=True)
    await stop.wait()
    await bus.shutdown()


async def publish_batches(bus: Any) -> float:
    started = time.time()
    for first in range(0, EVENTS, BATCH):
        await asyncio.gather(*(bus.publish("bench.tick", {"i": i}) for i in range(first, first + BATCH)))
    return started


async def publish_paced(bus: Any) -> None:
    for i in range(LATENCY_EVENTS):
        await bus.publish("bench.tick", {"i": i})
        await asyncio.sleep(0.002)  # one event at a time: latency without a queue in front


async def events_part() -> None:
    url = os.environ.get("REDIS_URL_TEST", "").strip() or DEFAULT_REDIS
    try:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
        await client.ping()
    except Exception as exc:  # any failure to reach it means: skip this part
        print(f"scale_events: skipped (Redis at {url} is unreachable: {type(exc).__name__}: {exc})")
        return
    prefix = f"keel-bench-{uuid.uuid4().hex[:8]}:"
    consumer = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "consume",
        url,
        prefix,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )
    local = remote = None
    try:
        assert consumer.stdout is not None
        async with asyncio.timeout(30):
            assert (await consumer.stdout.readline()).strip() == b"ready", "the consumer did not start"
        remote = await new_bus(url, prefix)
        local = await new_bus("", "")
        tally = Tally()

        async def on_local_tick(event: Any) -> None:
            tally.hit(event)

        await local.subscribe("bench.tick", on_local_tick)

        async def local_report(expect: int) -> dict[str, Any]:
            for _ in range(6000):
                if tally.count >= expect:
                    break
                await asyncio.sleep(0.005)
            return tally.report()

        async def remote_report(expect: int) -> dict[str, Any]:
            report: dict[str, Any] = await remote.request("bench.report", {"expect": expect}, timeout=60)
            return report

        rates: dict[str, list[float]] = {"inprocess": [], "redis": []}
        latencies: dict[str, list[float]] = {"inprocess": [], "redis": []}
        runs = (("inprocess", local, local_report), ("redis", remote, remote_report))
        for round_number in range(ROUNDS):
            for kind, bus, report in runs if round_number % 2 == 0 else reversed(runs):
                started = await publish_batches(bus)
                done = await report(EVENTS)
                assert done["count"] == EVENTS, (kind, done["count"])
                rates[kind].append(EVENTS / (done["last"] - started))
                await publish_paced(bus)
                done = await report(LATENCY_EVENTS)
                latencies[kind] += [seconds * 1000 for seconds in done["latencies"]]
        inprocess, redis_rate = statistics.median(rates["inprocess"]), statistics.median(rates["redis"])
        emit("scale_events_inprocess_rate", inprocess, "events/s")
        emit("scale_events_redis_2proc_rate", redis_rate, "events/s")
        emit("scale_events_redis_vs_inprocess", redis_rate / inprocess, "x")
        for kind, name in (("inprocess", "inprocess"), ("redis", "redis_2proc")):
            emit(f"scale_events_{name}_latency_p50", percentile(latencies[kind], 0.5), "ms")
            emit(f"scale_events_{name}_latency_p99", percentile(latencies[kind], 0.99), "ms")
    finally:
        if remote is not None:
            try:
                await remote.request("bench.stop", {}, timeout=10)
            except Exception as exc:  # the consumer is killed below anyway
                print(f"# the consumer did not stop cleanly: {exc}", file=sys.stderr)
            await remote.shutdown()
        if local is not None:
            await local.shutdown()
        try:
            await asyncio.wait_for(consumer.wait(), 15)
        except TimeoutError:
            consumer.kill()
            await consumer.wait()
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


# -- 2. HTTP -----------------------------------------------------------------------------------

KEEL_MAIN = """
import sys
sys.path.insert(0, {project!r})
from core import Kernel
sys.exit(Kernel({root!r}).run())
"""

ROUND_ROBIN = """
local ports = {{{ports}}}
local next_port = 0
function setup(thread)
  next_port = next_port % #ports + 1
  thread.addr = wrk.lookup("127.0.0.1", tostring(ports[next_port]))[1]
end
"""


def make_root(base: Path) -> Path:
    root = base / "keel"
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "http").symlink_to(PROJECT / "tools" / "http", target_is_directory=True)
    plugin = root / "domains" / "bench" / "plugins" / "ping.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(textwrap.dedent(PING_PLUGIN), encoding="utf-8")
    return root


def run_wrk(wrk: str, url: str, script: Path | None, duration: str) -> float:
    command = [wrk, "-t2", "-c32", f"-d{duration}", url]
    if script is not None:
        command[1:1] = ["-s", str(script)]
    output = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    rps = re.search(r"Requests/sec:\s*([\d.]+)", output)
    if rps is None or "Non-2xx" in output:
        raise RuntimeError(f"unexpected wrk output:\n{output}")
    return float(rps.group(1))


def http_part() -> None:
    wrk = ensure_wrk()
    if wrk is None:
        print("scale_http: skipped (wrk is not installed: apt-get install wrk)")
        return
    with tempfile.TemporaryDirectory(prefix="keel-bench-scale-") as tmp:
        base = Path(tmp)
        script = base / "keel_main.py"
        script.write_text(KEEL_MAIN.format(project=str(PROJECT), root=str(make_root(base))))
        ports = [free_port(), free_port()]
        balancer = base / "round_robin.lua"
        balancer.write_text(ROUND_ROBIN.format(ports=", ".join(map(str, ports))))
        processes = [
            start_server(
                script, port, "/ping", {"PORT": str(port), "HOST": "127.0.0.1", "LOG_LEVEL": "WARNING"}
            )
            for port in ports
        ]
        try:
            url = f"http://127.0.0.1:{ports[0]}/ping"
            run_wrk(wrk, url, None, "1s")  # warm-up, both
            run_wrk(wrk, url, balancer, "1s")
            one: list[float] = []
            two: list[float] = []
            for round_number in range(HTTP_ROUNDS):
                order = [(one, None), (two, balancer)]
                for runs, lua in order if round_number % 2 == 0 else reversed(order):
                    runs.append(run_wrk(wrk, url, lua, HTTP_DURATION))
        finally:
            for process in processes:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
    emit("scale_http_1proc_rps", statistics.median(one), "req/s")
    emit("scale_http_2proc_rps", statistics.median(two), "req/s")
    emit("scale_http_2proc_vs_1proc", statistics.median(two) / statistics.median(one), "x")
    emit("scale_http_cpus", os.cpu_count() or 0, "cores")


def main() -> int:
    if sys.argv[1:2] == ["consume"]:
        asyncio.run(consume(sys.argv[2], sys.argv[3]))
        return 0
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    asyncio.run(events_part())
    http_part()
    return 0


if __name__ == "__main__":
    sys.exit(main())
