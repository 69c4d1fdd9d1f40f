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
    await ctx.invoker.chat(ChatRequest([Message("user", "hi")], "fake-model"), ctx)
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
    await ctx.invoker.tool(ToolRequest("lookup", {}, tool=FakeTool("lookup", "r")), ctx)
    (span,) = tracer.spans
    assert (span.name, span.kind) == ("execute_tool", "execute_tool")
    assert span.attrs == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.type": "function",
    }


async def test_a_failure_is_recorded_on_the_span_and_propagates() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM("ok", fail_times=1), trace=tracer, chat_middleware=[tracing()])
    with pytest.raises(TimeoutError):
        await ctx.invoker.chat(ChatRequest([Message("user", "hi")], "m"), ctx)
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
    assert tracer.spans[3].attrs["gen_ai.tool.call.id"] == "c"  # the model's call this run answers


async def test_usage_by_the_one_token_rule_and_absent_when_unknown() -> None:
    from core.contracts.types import Usage

    cached = Usage(input_tokens=3, output_tokens=2, cache_read_tokens=4, cache_write_tokens=1)
    tracer = RecordingTracer()
    llm = FakeLLM.script([Turn(content="a", usage=cached), Turn(content="b", usage=Usage())])
    ctx = make_test_ctx(llm=llm, trace=tracer, chat_middleware=[tracing()])
    for _ in range(2):
        await ctx.invoker.chat(ChatRequest([Message("user", "hi")], "m"), ctx)
    known, unknown = tracer.spans
    assert {k: v for k, v in known.attrs.items() if k.startswith("gen_ai.usage.")} == {
        "gen_ai.usage.input_tokens": 8,  # uncached + cache read + cache write
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.usage.cache_read.input_tokens": 4,
        "gen_ai.usage.cache_creation.input_tokens": 1,
    }
    assert not [k for k in unknown.attrs if k.startswith("gen_ai.usage.")]  # absent, not 0
