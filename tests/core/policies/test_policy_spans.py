"""tracing(): a chat span and an execute_tool span, stamped with GenAI attributes."""

from __future__ import annotations

import pytest

from core.agents import Agent
from core.agents.cognition import ReActCognition
from core.contracts.types import ChatRequest, Message, ToolCall, ToolRequest
from core.policies import tracing
from core.testing import FakeLLM, FakeTool, RecordingTracer, Turn, make_test_ctx


async def test_a_chat_span_carries_the_request_and_the_usage() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM("ok"), trace=tracer, chat_middleware=[tracing()])
    await ctx.invoker.chat(ChatRequest([Message("user", "hi")], "fake-model"), ctx)  # type: ignore[union-attr]
    (span,) = tracer.spans
    assert (span.name, span.kind, span.ended, span.error) == ("chat", "chat", True, None)
    assert span.attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "fake-model",
        "gen_ai.response.model": "fake-model",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "keel.response.tool_calls": 0,
    }


async def test_a_tool_span_names_the_tool() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM(), trace=tracer, tool_middleware=[tracing()])
    await ctx.invoker.tool(ToolRequest("lookup", {}, tool=FakeTool("lookup", "r")), ctx)  # type: ignore[union-attr]
    (span,) = tracer.spans
    assert (span.name, span.kind) == ("execute_tool", "execute_tool")
    assert span.attrs == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}


async def test_a_failure_is_recorded_on_the_span_and_propagates() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM("ok", fail_times=1), trace=tracer, chat_middleware=[tracing()])
    with pytest.raises(TimeoutError):
        await ctx.invoker.chat(ChatRequest([Message("user", "hi")], "m"), ctx)  # type: ignore[union-attr]
    (span,) = tracer.spans
    assert isinstance(span.error, TimeoutError) and span.ended


async def test_policy_spans_nest_under_the_agent_span() -> None:
    tracer = RecordingTracer()
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c", "lookup", {})]), Turn(content="done")])
    ctx = make_test_ctx(llm=llm, trace=tracer, chat_middleware=[tracing()], tool_middleware=[tracing()])
    agent = Agent("a", model="fake-model", cognition=ReActCognition([FakeTool("lookup", "r")]))
    await agent.run("go", ctx)
    assert [(s.name, s.parent.name if s.parent else None) for s in tracer.spans] == [
        ("invoke_agent", None),
        ("compose", "invoke_agent"),
        ("chat", "invoke_agent"),
        ("execute_tool", "invoke_agent"),
        ("chat", "invoke_agent"),
    ]
    assert tracer.spans[2].attrs["keel.response.tool_calls"] == 1
