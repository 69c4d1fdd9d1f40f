"""``tracing()``: one span per model call and per tool run, stamped from the result.

Span names and attribute keys follow the OpenTelemetry GenAI conventions so a tracing adapter can
export them untranslated, while ``core`` stays free of OpenTelemetry:

* a chat call opens ``("chat", "chat")`` with ``gen_ai.operation.name``,
  ``gen_ai.request.model`` and, when tools are offered, ``keel.request.tools`` (their names);
  when the stream ends it sets ``gen_ai.response.model``, ``gen_ai.response.id`` (when the
  provider sent one), ``gen_ai.response.finish_reasons``, the ``gen_ai.usage.*`` counts by the one
  token rule of :mod:`core.contracts.genai` (left out when the usage is unknown), and
  ``keel.response.tool_calls`` (how many tool calls the answer asked for);
* a tool run opens ``("execute_tool", "execute_tool")`` with ``gen_ai.operation.name``,
  ``gen_ai.tool.name``, ``gen_ai.tool.type`` (``function``) and ``gen_ai.tool.call.id`` when the
  run answers a model's tool call.

A failure propagates through the span, so the tracer sees the exception that ended it. The span is
opened on ``ctx.trace`` (a no-op tracer unless one is wired).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from core.contracts import genai
from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import ChatRequest, Delta, ToolRequest, assemble_deltas

__all__ = ["tracing"]


def tracing() -> Middleware:
    """Open a span around each chat call and tool run on ``ctx.trace``."""

    async def tracing_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        request = call.request
        trace = call.ctx.trace
        if isinstance(request, ToolRequest):
            tool_attrs = {
                genai.OPERATION_NAME: genai.OPERATION_EXECUTE_TOOL,
                genai.TOOL_NAME: request.name,
                genai.TOOL_TYPE: "function",
            }
            if request.call_id:
                tool_attrs[genai.TOOL_CALL_ID] = request.call_id
            with trace.span("execute_tool", "execute_tool", tool_attrs):
                async for item in nxt(call):
                    yield item
            return
        model = request.model if isinstance(request, ChatRequest) else ""
        attrs: dict[str, Any] = {genai.OPERATION_NAME: genai.OPERATION_CHAT, genai.REQUEST_MODEL: model}
        if isinstance(request, ChatRequest) and request.tools is not None:
            attrs["keel.request.tools"] = [tool.name for tool in request.tools]
        with trace.span("chat", "chat", attrs) as span:
            deltas: list[Delta] = []
            response_id: str | None = None
            async for delta in nxt(call):
                deltas.append(delta)
                response_id = delta.response_id or response_id
                yield delta
            result = assemble_deltas(deltas)
            span.set_attribute(genai.RESPONSE_MODEL, result.model or model)
            if response_id:
                span.set_attribute(genai.RESPONSE_ID, response_id)
            if result.finish_reason:
                span.set_attribute(genai.RESPONSE_FINISH_REASONS, [result.finish_reason])
            reported = next((d.usage for d in reversed(deltas) if d.usage is not None), None)
            for key, value in genai.usage_attributes(reported).items():
                span.set_attribute(key, value)
            span.set_attribute("keel.response.tool_calls", len(result.tool_calls))

    return tracing_middleware
