"""Spans and metrics for model calls, named by OpenTelemetry's GenAI semantic conventions.

The ``llm`` tool cannot import the ``telemetry`` tool, so it talks to the OpenTelemetry API itself:
``opentelemetry.trace.get_tracer`` and ``opentelemetry.metrics.get_meter`` hand out no-op objects
until an SDK provider is installed (the telemetry tool installs its providers globally when it is
on, and passes its tracer provider to ``on_instrument``), so with telemetry off a call costs a
few no-op method calls.

Per call:

* a CLIENT span ``chat {model}`` with ``gen_ai.operation.name``, ``gen_ai.provider.name``,
  ``gen_ai.request.model`` (and ``temperature`` / ``max_tokens`` when set), ``server.address`` /
  ``server.port``; when the answer is complete, ``gen_ai.response.model``,
  ``gen_ai.response.finish_reasons`` and ``gen_ai.usage.input_tokens`` / ``output_tokens``. The
  semantic conventions count cached prompt tokens as input, so ``input_tokens`` here is
  ``Usage.input_tokens + cache_read_tokens + cache_write_tokens``. A failure sets ``error.type``
  (the error's ``reason``, or the exception's type) and an ERROR status; a consumer that stops reading
  early is not a failure.
* ``gen_ai.client.operation.duration`` (seconds, with ``error.type`` on failure) and, when usage
  arrived, ``gen_ai.client.token.usage`` once per token type (``input`` / ``output``), with the
  bucket boundaries the conventions recommend.

The span is started with the caller's context as parent but never made current: the stream is an
async generator that runs inside its consumer between items, so a current span would leak into the
consumer's own code.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from time import perf_counter
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from core.contracts.types import ChatRequest, Delta, Usage

SCOPE = "keel.llm"
OPERATION = "chat"
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


class GenAiTelemetry:
    """Wraps a backend's stream in a span and records the two GenAI client metrics."""

    def __init__(self, provider_name: str, server_address: str | None, server_port: int | None) -> None:
        self.provider_name = provider_name
        self._server: dict[str, Any] = {}
        if server_address:
            self._server["server.address"] = server_address
            if server_port is not None:
                self._server["server.port"] = server_port
        self.use(None, None)

    def use(self, tracer_provider: Any, meter_provider: Any) -> None:
        """Record through these providers (``None``: OpenTelemetry's global ones)."""
        tracer_source = tracer_provider if tracer_provider is not None else trace
        meter_source = meter_provider if meter_provider is not None else metrics
        self._tracer = tracer_source.get_tracer(SCOPE)
        meter = meter_source.get_meter(SCOPE)
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of a model call",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    async def observe(
        self, request: ChatRequest, stream: AsyncGenerator[Delta, None]
    ) -> AsyncGenerator[Delta, None]:
        base: dict[str, Any] = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.provider.name": self.provider_name,
            "gen_ai.request.model": request.model,
            **self._server,
        }
        attributes = dict(base)
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        span = self._tracer.start_span(
            f"{OPERATION} {request.model}", kind=SpanKind.CLIENT, attributes=attributes
        )
        started = perf_counter()
        usage: Usage | None = None
        finish_reasons: list[str] = []
        response_model: str | None = None
        error_type: str | None = None
        try:
            async with aclosing(stream) as deltas:
                async for delta in deltas:
                    if delta.usage is not None:
                        usage = delta.usage
                    if delta.finish_reason is not None:
                        finish_reasons.append(str(delta.finish_reason))
                    if delta.model:
                        response_model = delta.model
                    yield delta
        except Exception as exc:
            error_type = str(getattr(exc, "reason", "") or type(exc).__qualname__)
            if span.is_recording():
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self._finish(span, base, started, usage, finish_reasons, response_model, error_type)

    def _finish(
        self,
        span: Any,
        base: dict[str, Any],
        started: float,
        usage: Usage | None,
        finish_reasons: list[str],
        response_model: str | None,
        error_type: str | None,
    ) -> None:
        metric_attributes = dict(base)
        if response_model:
            metric_attributes["gen_ai.response.model"] = response_model
        if span.is_recording():
            if response_model:
                span.set_attribute("gen_ai.response.model", response_model)
            if finish_reasons:
                span.set_attribute("gen_ai.response.finish_reasons", finish_reasons)
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", _input_tokens(usage))
                span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            if error_type is not None:
                span.set_attribute("error.type", error_type)
        span.end()
        duration_attributes = dict(metric_attributes)
        if error_type is not None:
            duration_attributes["error.type"] = error_type
        self._duration.record(perf_counter() - started, duration_attributes)
        if usage is not None:
            self._tokens.record(_input_tokens(usage), {**metric_attributes, "gen_ai.token.type": "input"})
            self._tokens.record(usage.output_tokens, {**metric_attributes, "gen_ai.token.type": "output"})


def _input_tokens(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
