"""``tracing()``: one span per model call and per tool run, stamped from the result.

Span names and attribute keys follow the OpenTelemetry GenAI conventions so a tracing adapter can
export them untranslated, while ``core`` stays free of OpenTelemetry:

* a chat call opens ``("chat", "chat")`` with ``gen_ai.operation.name``,
  ``gen_ai.request.model`` and, when tools are offered, ``keel.request.tools`` (their names);
  when the stream ends it sets ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens``, and ``keel.response.tool_calls`` (how many
  tool calls the answer asked for);
* a tool run opens ``("execute_tool", "execute_tool")`` with ``gen_ai.operation.name`` and
  ``gen_ai.tool.name``.

A failure propagates through the span, so the tracer sees the exception that ended it. The span is
opened on ``ctx.trace`` (a no-op tracer unless one is wired).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import ChatRequest, Delta, ToolRequest, assemble_deltas

__all__ = ["tracing"]


def tracing() -> Middleware:
    """Open a span around each chat call and tool run on ``ctx.trace``."""

    async def tracing_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        request = call.request
        trace = call.ctx.trace
        if isinstance(request, ToolRequest):
            tool_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": request.name}
            with trace.span("execute_tool", "execute_tool", tool_attrs):
                async for item in nxt(call):
                    yield item
            return
        model = request.model if isinstance(request, ChatRequest) else ""
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        if isinstance(request, ChatRequest) and request.tools is not None:
            attrs["keel.request.tools"] = [tool.name for tool in request.tools]
        with trace.span("chat", "chat", attrs) as span:
            deltas: list[Delta] = []
            async for delta in nxt(call):
                deltas.append(delta)
                yield delta
            result = assemble_deltas(deltas)
            span.set_attribute("gen_ai.response.model", result.model or model)
            span.set_attribute("gen_ai.response.finish_reasons", [result.finish_reason or ""])
            span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
            span.set_attribute("keel.response.tool_calls", len(result.tool_calls))

    return tracing_middleware
