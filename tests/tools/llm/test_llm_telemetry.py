"""GenAI spans and metrics from the ``llm`` tool, read back through the OpenTelemetry SDK."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from core.contracts.types import Message
from tests.kit import booted, make_root
from tests.tools.llm.openai_server import OpenAIServer, Reply, text_reply
from tools.llm.errors import LLMError
from tools.llm.llm_tool import LlmTool

HELLO = [Message("user", "hello")]


class Recorded:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture
async def recorded(llm: LlmTool) -> Recorded:
    record = Recorded()
    await llm.on_instrument(record.tracer_provider, record.meter_provider)
    return record


async def test_a_call_is_a_client_span_named_after_the_model(
    llm: LlmTool, server: OpenAIServer, recorded: Recorded
) -> None:
    server.enqueue(text_reply("hi", usage=(12, 7)))
    await llm.chat(messages=HELLO, model="", temperature=0.5, max_tokens=20)
    (span,) = recorded.spans()
    assert span.name == "chat test-model"
    assert span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes)
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "test-model"
    assert attributes["gen_ai.request.temperature"] == 0.5
    assert attributes["gen_ai.request.max_tokens"] == 20
    assert attributes["gen_ai.response.model"] == "test-model"
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["gen_ai.response.id"] == "chatcmpl-test"  # the id the server sent
    assert attributes["gen_ai.usage.input_tokens"] == 12
    assert attributes["gen_ai.usage.output_tokens"] == 7
    assert attributes["server.address"] == "127.0.0.1"
    assert isinstance(attributes["server.port"], int)
    assert span.status.status_code is StatusCode.UNSET


async def test_token_usage_and_duration_metrics(
    llm: LlmTool, server: OpenAIServer, recorded: Recorded
) -> None:
    server.enqueue(text_reply("hi", usage=(12, 7)))
    await llm.chat(messages=HELLO, model="")
    tokens = {
        point.attributes["gen_ai.token.type"]: point for point in recorded.points("gen_ai.client.token.usage")
    }
    assert tokens["input"].sum == 12 and tokens["output"].sum == 7
    assert tokens["input"].attributes["gen_ai.request.model"] == "test-model"
    assert tokens["input"].explicit_bounds[:3] == (1, 4, 16)
    (duration,) = recorded.points("gen_ai.client.operation.duration")
    assert duration.count == 1 and duration.sum > 0
    assert "error.type" not in duration.attributes


async def test_a_failed_call_records_its_error_type(
    llm: LlmTool, server: OpenAIServer, recorded: Recorded
) -> None:
    server.enqueue(Reply(status=429, body={"error": {"message": "slow down"}}))
    with pytest.raises(LLMError):
        await llm.chat(messages=HELLO, model="")
    (span,) = recorded.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "rate_limited"
    (duration,) = recorded.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "rate_limited"
    assert recorded.points("gen_ai.client.token.usage") == []


async def test_stopping_early_is_not_an_error(llm: LlmTool, server: OpenAIServer, recorded: Recorded) -> None:
    server.enqueue(text_reply("a b c", pieces=3))
    stream = llm.stream(messages=HELLO, model="")
    await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    (span,) = recorded.spans()
    assert span.status.status_code is StatusCode.UNSET and "error.type" not in span.attributes


async def test_with_the_telemetry_tool_on_model_calls_are_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_ENABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "memory")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "memory")
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    root = make_root(tmp_path, tools=("llm", "telemetry"))
    async with booted(root) as kernel:
        await kernel.container.get("llm").chat(messages=HELLO, model="")
        exported = kernel.container.get("telemetry").memory_exporter.get_finished_spans()
        names = {span.name for span in exported}
    assert names == {"chat echo"}  # the tool's own GenAI span is the call's only span


async def test_cached_prompt_tokens_count_as_input_and_unknown_usage_is_absent(
    llm: LlmTool, server: OpenAIServer, recorded: Recorded
) -> None:
    from tests.tools.llm.openai_server import chunk, usage_chunk

    cached = Reply([chunk(content="hi"), chunk(finish_reason="stop"), usage_chunk(12, 7, cached=5)])
    no_usage = Reply([chunk(content="hi"), chunk(finish_reason="stop")])
    server.enqueue(cached)
    server.enqueue(no_usage)
    await llm.chat(messages=HELLO, model="")
    await llm.chat(messages=HELLO, model="")
    with_usage, without = recorded.spans()
    assert with_usage.attributes["gen_ai.usage.input_tokens"] == 12  # the whole prompt, cached or not
    assert with_usage.attributes["gen_ai.usage.cache_read.input_tokens"] == 5
    assert not [key for key in without.attributes if key.startswith("gen_ai.usage.")]
    tokens = recorded.points("gen_ai.client.token.usage")
    by_type = sorted((p.attributes["gen_ai.token.type"], p.sum) for p in tokens)
    assert by_type == [("input", 12), ("output", 7)]
