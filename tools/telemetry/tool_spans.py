"""The span factory the telemetry tool registers on the Container: one span per proxied tool call.

Every call the ToolProxy makes runs inside ``factory(tool, method)``; the span is named
``<tool>.<method>`` and carries ``keel.tool`` and ``keel.method``. A tool whose class sets
``traces_own_calls = True`` gets none: it makes the span of each call itself, by the semantic
conventions of its kind of work (the ``llm`` tool's ``chat {model}``), and a second span around it
would give one piece of work two shapes. A call that raises an
``Exception`` gets the exception recorded as an event and an ERROR status; a ``BaseException`` that
is control flow (task cancellation, a consumer closing a stream) ends the span without calling it
an error, as the ToolProxy does for health.

It runs on every call, so it is built to be cheap: the name and attributes of each (tool, method)
are computed once; the context manager is a small ``__slots__`` class that calls the tracer's
``start_span`` and the context API's ``attach``/``detach`` directly instead of going through
``start_as_current_span`` and ``use_span`` (two generator-based context managers per call).

Span parenting follows OpenTelemetry's context, which lives in a ``contextvars`` variable: a tool
call inside an HTTP handler is a child of the request's server span, and calls made by tasks the
handler spawns are children too, because asyncio copies the context into every task. Calls to
async-generator methods (streams) are the exception: the generator runs in its consumer's context
between items, so making its span current would leak it into the consumer's code; their span is
started with the caller's parent and ended when the stream ends, but never made current.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

TOOL_ATTRIBUTE = "keel.tool"
METHOD_ATTRIBUTE = "keel.method"


class _Untraced:
    """The context manager for tools that get no span: does nothing, shared by every call."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


UNTRACED = _Untraced()


class _CallShape:
    """What is fixed about one (tool, method): the span name, its attributes, whether it streams."""

    __slots__ = ("attributes", "name", "stream")

    def __init__(self, tool: str, method: str, stream: bool) -> None:
        self.name = f"{tool}.{method}"
        self.attributes = {TOOL_ATTRIBUTE: tool, METHOD_ATTRIBUTE: method}
        self.stream = stream


class ToolCallSpan:
    """The span around one tool call (a context manager used once)."""

    __slots__ = ("_shape", "_span", "_token", "_tracer")

    def __init__(self, tracer: Tracer, shape: _CallShape) -> None:
        self._tracer = tracer
        self._shape = shape

    def __enter__(self) -> trace.Span:
        shape = self._shape
        span = self._tracer.start_span(shape.name, attributes=shape.attributes)
        self._span = span
        self._token = None if shape.stream else otel_context.attach(trace.set_span_in_context(span))
        return span

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        span = self._span
        if self._token is not None:
            otel_context.detach(self._token)
        if isinstance(exc, Exception) and span.is_recording():
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()


class ToolSpanFactory:
    """``factory(tool, method)`` for ``Container.register_span_factory``."""

    def __init__(self, tracer: Tracer, raw_tools: Mapping[str, Any], untraced: frozenset[str]) -> None:
        self._tracer = tracer
        self._raw_tools = dict(raw_tools)
        self._untraced = untraced
        self._shapes: dict[tuple[str, str], _CallShape | None] = {}

    def __call__(self, tool: str, method: str) -> ToolCallSpan | _Untraced:
        try:
            shape = self._shapes[tool, method]
        except KeyError:
            shape = self._shapes[tool, method] = self._learn(tool, method)
        if shape is None:
            return UNTRACED
        return ToolCallSpan(self._tracer, shape)

    def _learn(self, tool: str, method: str) -> _CallShape | None:
        raw = self._raw_tools.get(tool)
        if tool in self._untraced or getattr(raw, "traces_own_calls", False) is True:
            return None
        function = getattr(raw, method, None)
        return _CallShape(tool, method, stream=inspect.isasyncgenfunction(function))
