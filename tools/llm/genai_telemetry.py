"""Spans and metrics for model calls, named by OpenTelemetry's GenAI semantic conventions.

The ``llm`` tool cannot import the ``telemetry`` tool, so it talks to the OpenTelemetry API itself:
``opentelemetry.trace.get_tracer`` and ``opentelemetry.metrics.get_meter`` hand out no-op objects
until an SDK provider is installed (the telemetry tool installs its providers globally when it is
on, and passes its providers to ``on_instrument``), so with telemetry off a call costs a few no-op
method calls. Every attribute and metric name comes from the ``opentelemetry-semantic-conventions``
package.

Per call:

* a CLIENT span ``chat {model}`` with ``gen_ai.operation.name``, ``gen_ai.provider.name``,
  ``gen_ai.request.model`` (and ``temperature`` / ``max_tokens`` when set), ``server.address`` /
  ``server.port``; when the answer is complete, ``gen_ai.response.model``,
  ``gen_ai.response.id`` (when the server sent one), ``gen_ai.response.finish_reasons`` and the
  ``gen_ai.usage.*`` counts by the one token rule of :mod:`core.contracts.genai` (cached prompt
  tokens count as input; left out when the server reported no usage). A failure sets
  ``error.type`` (the error's ``reason``, or the exception's type) and an ERROR status; a consumer
  that stops reading early is not a failure.
* ``gen_ai.client.operation.duration`` (seconds, with ``error.type`` on failure) and, when usage
  arrived, ``gen_ai.client.token.usage`` once per token type (``input`` / ``output``), with the
  bucket boundaries the conventions recommend.

This span is the one span of a model call: the tool declares ``traces_own_calls``, so the ToolProxy
makes no ``llm.<method>`` span around it, and the span has the same parent whether the call comes
from an agent run (``invoke_agent``) or straight from a plugin (its request's server span). It is
started with the caller's context as parent but never made current: the stream is an async
generator that runs inside its consumer between items, so a current span would leak into the
consumer's own code.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from time import perf_counter
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT
from opentelemetry.trace import SpanKind, Status, StatusCode

from core.contracts.genai import (
    ERROR_TYPE,
    METRIC_OPERATION_DURATION,
    METRIC_TOKEN_USAGE,
    OPERATION_CHAT,
    OPERATION_NAME,
    PROVIDER_NAME,
    REQUEST_MAX_TOKENS,
    REQUEST_MODEL,
    REQUEST_TEMPERATURE,
    RESPONSE_FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    TOKEN_TYPE,
    TOKEN_TYPE_INPUT,
    TOKEN_TYPE_OUTPUT,
    usage_attributes,
)
from core.contracts.types import ChatRequest, Delta, Usage

SCOPE = "keel.llm"
OPERATION = OPERATION_CHAT
INPUT = TOKEN_TYPE_INPUT
OUTPUT = TOKEN_TYPE_OUTPUT
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


class GenAiTelemetry:
    """Wraps a backend's stream in a span and records the two GenAI client metrics."""

    def __init__(self, provider_name: str, server_address: str | None, server_port: int | None) -> None:
        self.provider_name = provider_name
        self._server: dict[str, Any] = {}
        if server_address:
            self._server[SERVER_ADDRESS] = server_address
            if server_port is not None:
                self._server[SERVER_PORT] = server_port
        self.use(None, None)

    def use(self, tracer_provider: Any, meter_provider: Any) -> None:
        """Record through these providers (``None``: OpenTelemetry's global ones)."""
        tracer_source = tracer_provider if tracer_provider is not None else trace
        meter_source = meter_provider if meter_provider is not None else metrics
        self._tracer = tracer_source.get_tracer(SCOPE)
        meter = meter_source.get_meter(SCOPE)
        self._tokens = meter.create_histogram(
            METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Tokens used per model call",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            METRIC_OPERATION_DURATION,
            unit="s",
            description="Duration of a model call",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    async def observe(
        self, request: ChatRequest, stream: AsyncGenerator[Delta, None]
    ) -> AsyncGenerator[Delta, None]:
        base: dict[str, Any] = {
            OPERATION_NAME: OPERATION,
            PROVIDER_NAME: self.provider_name,
            REQUEST_MODEL: request.model,
            **self._server,
        }
        attributes = dict(base)
        if request.temperature is not None:
            attributes[REQUEST_TEMPERATURE] = request.temperature
        if request.max_tokens is not None:
            attributes[REQUEST_MAX_TOKENS] = request.max_tokens
        span = self._tracer.start_span(
            f"{OPERATION} {request.model}", kind=SpanKind.CLIENT, attributes=attributes
        )
        started = perf_counter()
        usage: Usage | None = None
        finish_reasons: list[str] = []
        response_model: str | None = None
        response_id: str | None = None
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
                    if delta.response_id:
                        response_id = delta.response_id
                    yield delta
        except Exception as exc:
            error_type = str(getattr(exc, "reason", "") or type(exc).__qualname__)
            if span.is_recording():
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self._finish(span, base, started, usage, finish_reasons, response_model, response_id, error_type)

    def _finish(
        self,
        span: Any,
        base: dict[str, Any],
        started: float,
        usage: Usage | None,
        finish_reasons: list[str],
        response_model: str | None,
        response_id: str | None,
        error_type: str | None,
    ) -> None:
        metric_attributes = dict(base)
        if response_model:
            metric_attributes[RESPONSE_MODEL] = response_model
        counted = usage_attributes(usage)
        if span.is_recording():
            if response_model:
                span.set_attribute(RESPONSE_MODEL, response_model)
            if response_id:
                span.set_attribute(RESPONSE_ID, response_id)
            if finish_reasons:
                span.set_attribute(RESPONSE_FINISH_REASONS, finish_reasons)
            for key, value in counted.items():
                span.set_attribute(key, value)
            if error_type is not None:
                span.set_attribute(ERROR_TYPE, error_type)
        span.end()
        duration_attributes = dict(metric_attributes)
        if error_type is not None:
            duration_attributes[ERROR_TYPE] = error_type
        self._duration.record(perf_counter() - started, duration_attributes)
        if counted and usage is not None:
            self._tokens.record(usage.prompt_tokens, {**metric_attributes, TOKEN_TYPE: INPUT})
            self._tokens.record(usage.output_tokens, {**metric_attributes, TOKEN_TYPE: OUTPUT})
