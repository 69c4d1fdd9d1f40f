"""The durable-run runtime's parts on their own: event ids and replay positions, the run record's
round trip through a checkpoint, the catalog and the tracing adapter."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from core.agents import Agent
from core.context import bound, current_plugin_var
from core.contracts.ports import Checkpoint, CheckpointStatus
from core.contracts.types import Message, ToolCall, Usage
from core.runs import AgentCatalog, catalog_for
from core.runs.feed import RunFeed, parse_event_id, position_after
from core.runs.record import RunRecord
from core.runs.tool_records import call_key, recorded_result
from core.runs.tracing import TelemetryTrace, trace_for
from core.runtime import NoopTrace
from core.state.stores import InMemoryStore
from core.testing import FakeLLM


def test_event_ids_sort_by_epoch_then_number() -> None:
    events = [{"id": i} for i in ("0-1", "0-2", "0-3", "1-4", "1-5", "2-6")]
    assert position_after(events, None) == 0
    assert position_after(events, "0-2") == 2
    assert position_after(events, "0-9") == 3  # an id lost in a crash: everything of the next epoch
    assert position_after(events, "2-6") == 6
    assert parse_event_id(" 3-14 ") == (3, 14)
    for bad in ("", "7", "a-1", "1-b", "-1", "1--2"):
        with pytest.raises(ValueError, match="is not an event id"):
            parse_event_id(bad)


async def test_a_feed_wakes_its_readers_and_ends_when_closed() -> None:
    feed = RunFeed([], epoch=2)
    reader = asyncio.create_task(feed.wait_beyond(0))
    await asyncio.sleep(0)
    assert not reader.done()
    event = feed.publish("message_delta", {"text": "hi"})
    await reader
    assert event == {"id": "2-1", "kind": "message_delta", "data": {"text": "hi"}}
    waiting = asyncio.create_task(feed.wait_beyond(1))
    await asyncio.sleep(0)
    feed.close()
    await waiting


def test_a_record_round_trips_through_a_checkpoint() -> None:
    record = RunRecord("r1", "ops", "do it", max_cost_usd="0.5", max_calls=3)
    record.transcript = [
        Message("system", "sys"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "f", {"a": [1]})]),
        Message("tool", "ok", name="f", tool_call_id="c1"),
    ]
    record.pending = {"key": "k", "turn": 1, "call": {"id": "c1", "name": "f", "arguments": {"a": [1]}}}
    record.usage = Usage(input_tokens=5, output_tokens=2, cost_usd=0.25)
    record.events = [{"id": "0-1", "kind": "message_delta", "data": {"text": "x"}}]
    record.epoch, record.model_calls, record.cost_usd = 1, 2, "0.250000"
    state = record.to_state()
    back = RunRecord.from_checkpoint(Checkpoint("r1", 7, state, 1.0, CheckpointStatus.SUSPENDED))
    assert back.to_state() == state
    assert back.version == 7 and back.status is CheckpointStatus.SUSPENDED and not back.terminal
    assert back.transcript == record.transcript


async def test_the_catalog_keeps_names_to_their_plugin_and_waits_for_declarations() -> None:
    catalog = AgentCatalog()
    llm = FakeLLM("hi")
    with bound(current_plugin_var, "agents.One"):
        catalog.declare(Agent("a", "m"), llm=llm)
        catalog.declare(Agent("a", "m2"), llm=llm)  # the same plugin replaces its agent
    with (
        bound(current_plugin_var, "agents.Two"),
        pytest.raises(ValueError, match="already declared by agents.One"),
    ):
        catalog.declare(Agent("a", "m"), llm=llm)
    spec = catalog.get("a")
    assert spec is not None and spec.agent.model == "m2" and spec.view()["declared_by"] == "agents.One"

    assert await catalog.wait_for("late", 0.01) is None
    waiter = asyncio.create_task(catalog.wait_for("late", 5))
    await asyncio.sleep(0)
    thread = threading.Thread(target=lambda: catalog.declare(Agent("late", "m"), llm=llm))  # a plain on_boot
    thread.start()
    thread.join()
    found = await waiter
    assert found is not None and found.agent.name == "late"
    catalog.withdraw("late")
    assert catalog.get("late") is None and [s.agent.name for s in catalog.specs()] == ["a"]


def test_each_container_has_its_own_catalog() -> None:
    first, second = object.__new__(_Container), object.__new__(_Container)
    assert catalog_for(first) is catalog_for(first)
    assert catalog_for(first) is not catalog_for(second)


class _Container:
    """Any object can key a catalog; the kernel passes its Container."""


async def test_recorded_results_are_read_back_and_anything_else_is_none() -> None:
    store = InMemoryStore()
    key = call_key("r", 2, "c1")
    assert key == "agents:tool:r:2:c1"
    assert await recorded_result(store, key) is None
    assert await recorded_result(None, key) is None
    await store.set(key, {"result": [1], "text": "[1]"})
    assert await recorded_result(store, key) == {"result": [1], "text": "[1]"}
    await store.set(key, "not a record")
    assert await recorded_result(store, key) is None


def test_tracing_is_off_unless_the_telemetry_tool_is_on() -> None:
    class Telemetry:
        def __init__(self, enabled: bool) -> None:
            self.enabled = enabled

        def get_tracer(self, name: str) -> Any:
            return TracerProvider().get_tracer(name)

    assert isinstance(trace_for(None), NoopTrace)
    assert isinstance(trace_for(Telemetry(False)), NoopTrace)
    assert isinstance(trace_for(Telemetry(True)), TelemetryTrace)


def test_the_tracing_adapter_names_tool_spans_and_nests_them() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace = TelemetryTrace(provider.get_tracer("test"))
    with trace.span("invoke_agent ops", "client", {"gen_ai.agent.name": "ops", "skip": None}):
        outer_id = trace.current_span_id()
        with trace.span("execute_tool", "execute_tool", {"gen_ai.tool.name": "f", "list": [1, "a"]}):
            trace.add_event_to_current_span("note", {"n": 1})
    assert trace.current_span_id() is None
    inner, outer = exporter.get_finished_spans()
    assert (inner.name, outer.name) == ("execute_tool f", "invoke_agent ops")
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id
    assert outer_id == f"{outer.context.span_id:016x}"
    assert inner.attributes is not None and outer.attributes is not None
    assert dict(inner.attributes) == {"gen_ai.tool.name": "f", "list": ("1", "a")}
    assert [e.name for e in inner.events] == ["note"]
    assert "skip" not in outer.attributes
