"""What telemetry costs a proxied tool call: off against on, sync and async, against the SDK's own span.

One process, one ToolProxy around a trivial tool, one telemetry tool set up with
``OTEL_ENABLED=true`` and the in-memory exporters (a SimpleSpanProcessor, the same for the SDK
baseline). "Off" unregisters the span factory and the metrics sink, "on" registers them again, so
the two differ by exactly what the telemetry tool adds. Configurations are interleaved within each
round and the median of the rounds is reported; the machine is small and noisy.

Lines:

- ``toolcall_{sync,async}_{off,on}``: µs per proxied call;
- ``toolcall_{sync,async}_traced_extra``: on minus off, what a traced call adds;
- ``sdk_span_{sync,async}``: ``tracer.start_span`` / ``span.end()`` around the same direct call
  (the SDK's cheapest span, no context attached), minus the direct call;
- ``toolcall_{sync,async}_traced_extra_with_metrics``: traced extra plus the deferred metrics
  cost per call (paid on the drain thread, which holds the GIL), and its ratio to the SDK span;
- ``toolcall_{sync,async}_extra_over_sdk_span``: traced extra minus the SDK span (target <= 2 us);
- ``metrics_drain_per_call``: the deferred cost of one call's metrics, paid by the drain thread;
- ``request_{off,on}``: µs per ``GET /items/{id}`` through the http tool's whole ASGI stack
  (in-process httpx client, no socket), on an uninstrumented tool and on one instrumented with the
  telemetry tool's providers (a server span, its attributes and the request-duration metric);
- ``request_traced_extra``: on minus off, what tracing adds to one request.

Run: ``.venv/bin/python bench/bench_telemetry.py``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.update(OTEL_ENABLED="true", OTEL_TRACES_EXPORTER="memory", OTEL_METRICS_EXPORTER="memory")
for _name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER", "KEEL_TELEMETRY_UNTRACED_TOOLS"):
    os.environ.pop(_name, None)

from bench._util import emit, emit_ratio  # noqa: E402
from core import BaseTool, Container, Registry  # noqa: E402
from tools.telemetry.telemetry_tool import TelemetryTool  # noqa: E402

ROUNDS = 9
CALLS = 4000


class Adder(BaseTool):
    name = "adder"

    def add(self, a: int, b: int) -> int:
        return a + b

    async def aadd(self, a: int, b: int) -> int:
        return a + b


def sync_per_call(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - start) / CALLS * 1e6


async def async_per_call(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        await fn()
    return (time.perf_counter() - start) / CALLS * 1e6


async def main() -> None:
    registry = Registry()
    container = Container(registry)
    adder = Adder()
    container.add(adder)
    telemetry = TelemetryTool()
    telemetry.bind(project_root=ROOT, registry=registry)
    container.add(telemetry)
    await telemetry.setup()
    await telemetry.on_boot_complete(container)
    metrics = telemetry._call_metrics  # the harness drains by hand, outside the timed loops
    assert metrics is not None
    metrics.stop()
    factory, sink = container.span_factory, metrics.sink
    exporter = telemetry.memory_exporter
    proxy = container.get("adder")
    tracer = telemetry.tracer_provider.get_tracer("bench")
    attributes = {"keel.tool": "adder", "keel.method": "add"}

    def switch(on: bool) -> None:
        container.register_span_factory(factory if on else None)
        if on and sink not in registry.metrics_sinks:
            registry.add_metrics_sink(sink)
        if not on:
            registry.remove_metrics_sink(sink)

    def tidy() -> None:
        exporter.clear()
        metrics.drain()

    def sdk_sync() -> int:  # the SDK's cheapest span: start and end, no context attached
        span = tracer.start_span("adder.add", attributes=attributes)
        try:
            return adder.add(1, 2)
        finally:
            span.end()

    async def sdk_async() -> int:
        span = tracer.start_span("adder.aadd", attributes=attributes)
        try:
            return await adder.aadd(1, 2)
        finally:
            span.end()

    samples: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    for _ in range(ROUNDS):
        switch(False)
        keep("sync_off", sync_per_call(lambda: proxy.add(1, 2)))
        keep("async_off", await async_per_call(lambda: proxy.aadd(1, 2)))
        keep("sync_direct", sync_per_call(lambda: adder.add(1, 2)))
        keep("async_direct", await async_per_call(lambda: adder.aadd(1, 2)))
        keep("sdk_sync", sync_per_call(sdk_sync))
        keep("sdk_async", await async_per_call(sdk_async))
        tidy()
        switch(True)
        keep("sync_on", sync_per_call(lambda: proxy.add(1, 2)))
        keep("async_on", await async_per_call(lambda: proxy.aadd(1, 2)))
        exporter.clear()
        pending = len(registry.metrics_sinks) and 2 * CALLS
        start = time.perf_counter()
        drained = metrics.drain()
        keep("drain", (time.perf_counter() - start) / max(drained, 1) * 1e6)
        assert drained == pending, (drained, pending)

    await request_rounds(telemetry, keep, tidy)
    median = {name: statistics.median(values) for name, values in samples.items()}
    switch(False)
    await telemetry.shutdown()

    for kind in ("sync", "async"):
        off, on = median[f"{kind}_off"], median[f"{kind}_on"]
        sdk_span = median[f"sdk_{kind}"] - median[f"{kind}_direct"]
        extra = on - off
        emit(f"toolcall_{kind}_off", off, "us")
        emit(f"toolcall_{kind}_on", on, "us")
        emit(f"toolcall_{kind}_traced_extra", extra, "us")
        emit(f"sdk_span_{kind}", sdk_span, "us")
        emit(f"toolcall_{kind}_extra_over_sdk_span", extra - sdk_span, "us")
        emit(f"toolcall_{kind}_extra_vs_sdk_span_ratio", extra / sdk_span, "x")
        # Honest figure: what a traced call costs in all, the metrics deferred to the drain
        # thread (which holds the GIL while it works) included.
        total = extra + median["drain"]
        emit(f"toolcall_{kind}_traced_extra_with_metrics", total, "us")
        emit_ratio(
            f"toolcall_{kind}_total_vs_sdk_span",
            total / sdk_span,
            "SDK start_span/end (its cheapest span), same run",
            "total - SDK span <= 2 us (this bench's target)",
        )
        emit(f"toolcall_{kind}_total_over_sdk_span", total - sdk_span, "us")
    emit("metrics_drain_per_call", median["drain"], "us")
    emit("request_off", median["request_off"], "us")
    emit("request_on", median["request_on"], "us")
    emit("request_traced_extra", median["request_on"] - median["request_off"], "us")


async def request_rounds(
    telemetry: TelemetryTool, keep: Callable[[str, float], None], tidy: Callable[[], None]
) -> None:
    import httpx

    from tools.http.http_tool import HttpTool

    async def item(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return data

    tools: dict[str, HttpTool] = {}
    for name in ("off", "on"):
        tool = HttpTool()
        await tool.setup()
        tool.add_endpoint("/items/{item_id}", "GET", item)
        tools[name] = tool
    await tools["on"].on_instrument(telemetry.tracer_provider)
    clients = {
        name: httpx.AsyncClient(transport=httpx.ASGITransport(app=tool.asgi), base_url="http://keel.test")
        for name, tool in tools.items()
    }
    for c in clients.values():
        assert (await c.get("/items/1")).status_code == 200
    requests = CALLS // 10
    for _ in range(ROUNDS):
        for name, c in clients.items():
            start = time.perf_counter()
            for _ in range(requests):
                await c.get("/items/7")
            keep(f"request_{name}", (time.perf_counter() - start) / requests * 1e6)
            tidy()
    for c in clients.values():
        await c.aclose()


if __name__ == "__main__":
    asyncio.run(main())
