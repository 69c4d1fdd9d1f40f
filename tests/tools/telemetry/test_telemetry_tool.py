"""The telemetry tool on a booted kernel, read back through the SDK's in-memory exporter and reader.

Covers the no-op path (off, kill switch, packages missing), a span per tool call (sync, async,
streams, failures), parenting across tasks, the instrumentation hooks, the call metrics, sampling
and the resource, GenAI spans, and detaching everything on shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from core import Kernel
from tests.kit import booted, make_root, write

GREETER_TOOL = """
    import asyncio
    from core import BaseTool

    class Greeter(BaseTool):
        name = "greeter"

        def __init__(self):
            self.instrumented_with = None

        async def on_instrument(self, tracer_provider):
            self.instrumented_with = tracer_provider

        def greet(self, who):
            return f"hello {who}"

        async def agreet(self, who):
            await asyncio.sleep(0)
            return f"hello {who}"

        async def count(self, n):
            for i in range(n):
                yield i

        def fail(self):
            raise ValueError("no greeting today")

        async def wait_forever(self, started):
            started.set()
            await asyncio.Event().wait()
"""

BROKEN_INSTRUMENT_TOOL = """
    from core import BaseTool

    class Fragile(BaseTool):
        name = "fragile"

        def on_instrument(self, tracer_provider):
            raise RuntimeError("instrumentation library exploded")

        def ping(self):
            return "pong"
"""

SPEC_EXAMPLE_PLUGIN = """
    from core import BasePlugin

    class MyPlugin(BasePlugin):
        def __init__(self, telemetry, greeter):
            self.telemetry = telemetry
            self.greeter = greeter
            self.result = None

        async def execute(self, data, context=None):
            tracer = self.telemetry.get_tracer("my_plugin")
            with tracer.start_as_current_span("my_operation") as span:
                span.set_attribute("shop.items", 3)
                self.result = await self.greeter.agreet("plugin")
"""


@pytest.fixture(autouse=True)
def otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("OTEL_", "KEEL_TELEMETRY_"))]:
        monkeypatch.delenv(name)


def enable(monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    monkeypatch.setenv("OTEL_ENABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "memory")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "memory")
    for name, value in extra.items():
        monkeypatch.setenv(name, value)


def project(tmp_path: Path, *, plugin: bool = False, fragile: bool = False) -> Path:
    root = make_root(tmp_path, tools=("telemetry",))
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    if fragile:
        write(root, "tools/fragile/fragile_tool.py", BROKEN_INSTRUMENT_TOOL)
    if plugin:
        write(root, "domains/shop/plugins/my_plugin.py", SPEC_EXAMPLE_PLUGIN)
    return root


@pytest.fixture
async def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Kernel]:
    enable(monkeypatch)
    async with booted(project(tmp_path)) as kernel:
        yield kernel


def spans(kernel: Kernel) -> list[Any]:
    return list(kernel.container.get("telemetry").memory_exporter.get_finished_spans())


def by_name(kernel: Kernel, name: str) -> Any:
    found = [s for s in spans(kernel) if s.name == name]
    assert len(found) == 1, [s.name for s in spans(kernel)]
    return found[0]


# -- off: everything is a no-op ---------------------------------------------------------------------


async def test_off_by_default_the_tool_is_off_and_hands_out_no_ops(tmp_path: Path) -> None:
    async with booted(project(tmp_path, plugin=True)) as kernel:
        dump = kernel.registry.get_system_dump()
        assert dump["tools"]["telemetry"]["status"] == "OFF"
        assert "set OTEL_ENABLED=true" in dump["tools"]["telemetry"]["message"]
        plugin: Any = kernel.plugins["shop.MyPlugin"].instance
        await plugin.execute({})
        assert plugin.result == "hello plugin"
        telemetry = kernel.container.get("telemetry")
        assert not telemetry.enabled
        assert telemetry.memory_exporter is None
        assert kernel.container.span_factory is None
        assert kernel.registry.metrics_sinks == []
        with telemetry.get_tracer("x").start_as_current_span("s") as span:
            assert not span.is_recording()
        telemetry.get_meter("x").create_counter("c").add(1)
        assert telemetry.force_flush()


async def test_the_sdk_kill_switch_wins_over_enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enable(monkeypatch, OTEL_SDK_DISABLED="true")
    async with booted(project(tmp_path)) as kernel:
        assert kernel.registry.tool_status("telemetry") == "OFF"
        assert kernel.container.span_factory is None


async def test_without_the_packages_plugins_still_trace_through_no_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable(monkeypatch)
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    async with booted(project(tmp_path, plugin=True)) as kernel:
        dump = kernel.registry.get_system_dump()
        assert dump["tools"]["telemetry"]["status"] == "OFF"
        assert "cannot be imported" in dump["tools"]["telemetry"]["message"]
        plugin: Any = kernel.plugins["shop.MyPlugin"].instance
        await plugin.execute({})
        assert plugin.result == "hello plugin"
        tracer = kernel.container.get("telemetry").get_tracer("no_packages")
        assert type(tracer).__module__.endswith("telemetry.noop")
        with tracer.start_as_current_span("op") as span:
            span.set_attribute("k", 1)
            span.record_exception(ValueError("x"))
        assert kernel.container.get("greeter").greet("x") == "hello x"


# -- on: a span per tool call -----------------------------------------------------------------------


async def test_each_tool_call_is_a_span_named_after_tool_and_method(kernel: Kernel) -> None:
    assert kernel.container.get("telemetry").enabled
    greeter = kernel.container.get("greeter")
    assert greeter.greet("a") == "hello a"
    assert await greeter.agreet("b") == "hello b"
    assert [i async for i in greeter.count(3)] == [0, 1, 2]
    for name, method in (
        ("greeter.greet", "greet"),
        ("greeter.agreet", "agreet"),
        ("greeter.count", "count"),
    ):
        span = by_name(kernel, name)
        assert dict(span.attributes) == {"keel.tool": "greeter", "keel.method": method}
        assert span.status.status_code is StatusCode.UNSET
        assert span.kind is SpanKind.INTERNAL
        assert span.end_time >= span.start_time


async def test_a_failing_call_has_error_status_and_an_exception_event(kernel: Kernel) -> None:
    with pytest.raises(ValueError):
        kernel.container.get("greeter").fail()
    span = by_name(kernel, "greeter.fail")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: no greeting today"
    (event,) = span.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "no greeting today"


async def test_cancelling_a_call_ends_its_span_without_calling_it_an_error(kernel: Kernel) -> None:
    started = asyncio.Event()
    greeter = kernel.container.get("greeter")
    task = asyncio.create_task(greeter.wait_forever(started))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    span = by_name(kernel, "greeter.wait_forever")
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()


async def test_tool_calls_are_children_of_the_current_span_across_tasks(kernel: Kernel) -> None:
    telemetry, greeter = kernel.container.get("telemetry"), kernel.container.get("greeter")
    with telemetry.get_tracer("test").start_as_current_span("request") as parent:
        greeter.greet("direct")
        await asyncio.gather(greeter.agreet("one"), greeter.agreet("two"))
        await asyncio.create_task(greeter.agreet("task"))
    parent_id = parent.get_span_context().span_id
    children = [s for s in spans(kernel) if s.name.startswith("greeter.")]
    assert len(children) == 4
    assert {s.parent.span_id for s in children} == {parent_id}
    assert {s.context.trace_id for s in children} == {parent.get_span_context().trace_id}


async def test_a_stream_span_does_not_leak_into_the_consumer(kernel: Kernel) -> None:
    telemetry, greeter = kernel.container.get("telemetry"), kernel.container.get("greeter")
    tracer = telemetry.get_tracer("test")
    with tracer.start_as_current_span("consumer") as consumer:
        async for _ in greeter.count(2):
            greeter.greet("inside the loop")
    consumer_id = consumer.get_span_context().span_id
    stream = by_name(kernel, "greeter.count")
    assert stream.parent.span_id == consumer_id
    inner = [s for s in spans(kernel) if s.name == "greeter.greet"]
    assert len(inner) == 2 and {s.parent.span_id for s in inner} == {consumer_id}


async def test_the_telemetry_tools_own_calls_get_no_span(kernel: Kernel) -> None:
    kernel.container.get("telemetry").get_tracer("x")
    assert [s.name for s in spans(kernel)] == []


async def test_listed_tools_can_be_left_untraced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enable(monkeypatch, KEEL_TELEMETRY_UNTRACED_TOOLS="greeter")
    async with booted(project(tmp_path)) as kernel:
        kernel.container.get("greeter").greet("quiet")
        assert spans(kernel) == []
        assert kernel.registry.get_metrics()[-1]["method"] == "greet"


async def test_the_spec_example_traces_a_plugin_operation_around_a_tool_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable(monkeypatch)
    async with booted(project(tmp_path, plugin=True)) as kernel:
        await kernel.plugins["shop.MyPlugin"].instance.execute({})  # type: ignore[attr-defined]
        operation = by_name(kernel, "my_operation")
        call = by_name(kernel, "greeter.agreet")
        assert call.parent.span_id == operation.context.span_id
        assert operation.attributes["shop.items"] == 3
        assert operation.instrumentation_scope.name == "my_plugin"


# -- wiring into the kernel -------------------------------------------------------------------------


async def test_on_instrument_gets_the_provider_and_a_failing_hook_harms_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    enable(monkeypatch)
    caplog.set_level(logging.ERROR, logger="keel.telemetry")
    async with booted(project(tmp_path, fragile=True)) as kernel:
        telemetry = kernel.container.get("telemetry")
        assert kernel.container.get_raw_tools()["greeter"].instrumented_with is telemetry.tracer_provider  # type: ignore[attr-defined]
        assert kernel.registry.tool_status("fragile") == "OK"
        assert kernel.container.get("fragile").ping() == "pong"
        assert any("fragile: on_instrument() failed" in r.getMessage() for r in caplog.records)


async def test_calls_feed_the_counter_and_the_histogram(kernel: Kernel) -> None:
    greeter = kernel.container.get("greeter")
    greeter.greet("a")
    greeter.greet("b")
    with pytest.raises(ValueError):
        greeter.fail()
    telemetry = kernel.container.get("telemetry")
    assert telemetry.force_flush()
    points = metric_points(telemetry)
    key = (("keel.method", "greet"), ("keel.outcome", "ok"), ("keel.tool", "greeter"))
    failed = (("keel.method", "fail"), ("keel.outcome", "error"), ("keel.tool", "greeter"))
    assert points["tool_call_total"][key].value == 2
    assert points["tool_call_total"][failed].value == 1
    assert points["tool_call_duration"][key].count == 2
    assert points["tool_call_duration"][failed].count == 1
    assert points["tool_call_duration"][key].sum >= 0


def metric_points(telemetry: Any) -> dict[str, dict[tuple[tuple[str, Any], ...], Any]]:
    found: dict[str, dict[tuple[tuple[str, Any], ...], Any]] = {}
    data = telemetry.memory_metric_reader.get_metrics_data()
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    found.setdefault(metric.name, {})[tuple(sorted(point.attributes.items()))] = point
    return found


async def test_shutdown_detaches_the_factory_and_the_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable(monkeypatch)
    kernel = Kernel(project(tmp_path))
    await kernel.boot()
    assert kernel.container.span_factory is not None
    assert len(kernel.registry.metrics_sinks) == 1
    await kernel.shutdown()
    assert kernel.container.span_factory is None
    assert kernel.registry.metrics_sinks == []


# -- sampling, resource and GenAI spans -------------------------------------------------------------


async def test_the_sampler_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable(monkeypatch, OTEL_TRACES_SAMPLER="always_off")
    async with booted(project(tmp_path)) as kernel:
        kernel.container.get("greeter").greet("unsampled")
        assert spans(kernel) == []


async def test_a_sampler_it_does_not_know_makes_telemetry_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enable(monkeypatch, OTEL_TRACES_SAMPLER="traceidratio", OTEL_TRACES_SAMPLER_ARG="2")
    async with booted(project(tmp_path)) as kernel:
        dump = kernel.registry.get_system_dump()
        assert dump["tools"]["telemetry"]["status"] == "DEAD"
        message = dump["tools"]["telemetry"]["message"]
        assert "OTEL_TRACES_SAMPLER_ARG must be a number between 0 and 1" in message
        assert kernel.container.get("greeter").greet("x") == "hello x"
        assert kernel.container.span_factory is None


async def test_the_resource_names_the_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enable(monkeypatch, OTEL_SERVICE_NAME="shop", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
    async with booted(project(tmp_path)) as kernel:
        kernel.container.get("greeter").greet("x")
        resource = by_name(kernel, "greeter.greet").resource.attributes
        assert resource["service.name"] == "shop"
        assert resource["deployment.environment"] == "test"


async def test_the_service_name_defaults_to_keel(kernel: Kernel) -> None:
    kernel.container.get("greeter").greet("x")
    assert by_name(kernel, "greeter.greet").resource.attributes["service.name"] == "keel"


async def test_genai_spans_follow_the_semantic_conventions(kernel: Kernel) -> None:
    telemetry = kernel.container.get("telemetry")
    with telemetry.start_genai_span(
        "chat", model="small-model", provider="openai", attributes={"gen_ai.request.max_tokens": 64}
    ) as span:
        span.set_attribute("gen_ai.usage.input_tokens", 12)
    recorded = by_name(kernel, "chat small-model")
    assert recorded.kind is SpanKind.CLIENT
    assert dict(recorded.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "small-model",
        "gen_ai.request.max_tokens": 64,
        "gen_ai.usage.input_tokens": 12,
    }
