"""A ``TracePort`` over the ``telemetry`` tool, so agent runs and tool executions become spans.

The agent kernel opens spans on ``ctx.trace`` (the run itself here, ``execute_tool`` from the
``tracing()`` policy); this adapter turns each into an OpenTelemetry span from the telemetry tool's
tracer, made current so the ``llm`` tool's ``chat {model}`` spans and the proxy's tool-call spans
nest under it. Names follow the GenAI conventions: a span the policy calls ``execute_tool`` is named
``execute_tool {gen_ai.tool.name}``. With telemetry off the run gets ``NoopTrace`` and pays nothing.

The domain cannot import OpenTelemetry (third-party libraries are the tools' business), so the
tracer is used through the duck-typed surface the telemetry tool hands out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from core.contracts.ports import TracePort
from core.runtime import NoopTrace

SCOPE = "keel.agents"
_current: ContextVar[Any] = ContextVar("keel_agents_current_span", default=None)


class TelemetryTrace:
    """``TracePort`` backed by an OpenTelemetry tracer."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    @contextmanager
    def span(
        self, name: str, kind: str = "internal", attrs: Mapping[str, Any] | None = None
    ) -> Iterator[Any]:
        attributes = {k: _attribute(v) for k, v in (attrs or {}).items() if v is not None}
        tool = attributes.get("gen_ai.tool.name")
        if name == "execute_tool" and tool:
            name = f"execute_tool {tool}"
        with self._tracer.start_as_current_span(name, attributes=attributes) as span:
            token = _current.set(span)
            try:
                yield span
            finally:
                _current.reset(token)

    def current_span_id(self) -> str | None:
        span = _current.get()
        if span is None:
            return None
        context = span.get_span_context()
        return f"{context.span_id:016x}" if context.span_id else None

    def add_event_to_current_span(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        span = _current.get()
        if span is not None:
            span.add_event(name, {k: _attribute(v) for k, v in (attrs or {}).items()})


def trace_for(telemetry: Any) -> TracePort:
    """Spans through ``telemetry`` when it is on, else the no-op tracer."""
    if telemetry is None:
        return NoopTrace()
    flag = getattr(telemetry, "enabled", False)  # a property of the telemetry tool
    enabled = bool(flag() if callable(flag) else flag)
    return TelemetryTrace(telemetry.get_tracer(SCOPE)) if enabled else NoopTrace()


def _attribute(value: Any) -> Any:
    """An attribute value OpenTelemetry accepts: a scalar, or a tuple of scalars of one type (a
    mixed sequence becomes strings); anything else its ``str``."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        items = tuple(value)
        if (
            items
            and all(type(v) is type(items[0]) for v in items)
            and isinstance(items[0], str | bool | int | float)
        ):
            return items
        return tuple(str(v) for v in items)
    return str(value)
