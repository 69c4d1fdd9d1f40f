"""A ``TracePort`` over the ``telemetry`` tool, so agent runs and tool executions become spans.

The agent kernel opens spans on ``ctx.trace`` (the run itself here, ``execute_tool`` from the
``tracing()`` policy); this adapter turns each into an OpenTelemetry span from the telemetry tool's
tracer, made current so the ``llm`` tool's ``chat {model}`` spans and the proxy's tool-call spans
nest under it. Names follow the GenAI conventions: a span the policy calls ``execute_tool`` is named
``execute_tool {gen_ai.tool.name}``; the kind asked for is the span's kind (``invoke_agent`` is
CLIENT), and a span that gets ``error.type`` (set by the run, or by an exception leaving the span)
has status ERROR. With telemetry off the run gets ``NoopTrace`` and pays nothing.

The domain cannot import OpenTelemetry (third-party libraries are the tools' business), so the
tracer is used through the duck-typed surface the telemetry tool hands out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from core.contracts.genai import ERROR_TYPE, OPERATION_EXECUTE_TOOL, TOOL_NAME
from core.contracts.ports import TracePort
from core.runtime import NoopTrace

SCOPE = "keel.agents"
_current: ContextVar[Any] = ContextVar("keel_agents_current_span", default=None)


class _RunSpan:
    """The span handed to run code: an OpenTelemetry span whose ``error.type`` also sets its status
    to ERROR, as the conventions ask (the domain has no ``StatusCode`` to set it with)."""

    __slots__ = ("_error_status", "_span")

    def __init__(self, span: Any, error_status: Callable[[str], Any] | None) -> None:
        self._span = span
        self._error_status = error_status

    def set_attribute(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, _attribute(value))
        if key == ERROR_TYPE:
            self.fail(str(value))

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        self._span.add_event(name, {k: _attribute(v) for k, v in (attrs or {}).items()})

    def fail(self, description: str) -> None:
        if self._error_status is not None:
            self._span.set_status(self._error_status(description))

    def __getattr__(self, name: str) -> Any:  # get_span_context, is_recording, ...
        return getattr(self._span, name)


class TelemetryTrace:
    """``TracePort`` backed by an OpenTelemetry tracer.

    ``span_kind`` turns a ``TracePort`` kind (``"client"``, ``"internal"`` ...) into the tracer's own
    kind (a kind that is not one of OpenTelemetry's, like ``"compose"``, is INTERNAL), and
    ``error_status`` makes the ERROR status of a failed span; both come from the telemetry tool.
    An exception that leaves a span records it and sets ``error.type`` (the exception's type).
    """

    def __init__(
        self,
        tracer: Any,
        span_kind: Callable[[str], Any] | None = None,
        error_status: Callable[[str], Any] | None = None,
    ) -> None:
        self._tracer = tracer
        self._span_kind = span_kind
        self._error_status = error_status
        self._kinds: dict[str, Any] = {}

    @contextmanager
    def span(
        self, name: str, kind: str = "internal", attrs: Mapping[str, Any] | None = None
    ) -> Iterator[Any]:
        attributes = {k: _attribute(v) for k, v in (attrs or {}).items() if v is not None}
        tool = attributes.get(TOOL_NAME)
        if name == OPERATION_EXECUTE_TOOL and tool:
            name = f"{OPERATION_EXECUTE_TOOL} {tool}"
        options: dict[str, Any] = {"attributes": attributes}
        if self._span_kind is not None:
            found = self._kinds.get(kind)
            if found is None:
                found = self._kinds[kind] = self._span_kind(kind)
            options["kind"] = found
        with self._tracer.start_as_current_span(
            name, record_exception=False, set_status_on_exception=False, **options
        ) as otel_span:
            span = _RunSpan(otel_span, self._error_status)
            token = _current.set(otel_span)
            try:
                yield span
            except Exception as exc:
                otel_span.record_exception(exc)
                span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
                raise
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
    if not enabled:
        return NoopTrace()
    kinds, errors = getattr(telemetry, "span_kind", None), getattr(telemetry, "error_status", None)
    return TelemetryTrace(telemetry.get_tracer(SCOPE), kinds, errors)


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
