"""Agent: the single-call run, its transcript assembly, its stream, and its spans."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from core.agents import Agent, AgentResult, SingleCallCognition, StopReason
from core.contracts.middleware import Call, Handler
from core.contracts.types import ChatRequest, Message, StreamEventKind
from core.testing import FakeCompactor, FakeGrounder, FakeLLM, RecordingTracer, make_test_ctx


def capture(requests: list[ChatRequest]) -> Any:
    async def middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        assert isinstance(call.request, ChatRequest)
        requests.append(call.request)
        async for item in nxt(call):
            yield item

    return middleware


async def test_a_single_call_run_returns_the_answer_usage_and_transcript() -> None:
    llm = FakeLLM("The cert expired.")
    result = await Agent("analyst", model="fake-model").run("Why?", make_test_ctx(llm=llm))
    assert isinstance(result, AgentResult)
    assert result.output == "The cert expired." and not result.stopped
    assert result.reason is StopReason.COMPLETED and result.error is None and result.parsed is None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 5)
    assert result.model_calls == 1 and llm.calls == 1
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Why?"),
        ("assistant", "The cert expired."),
    ]


async def test_the_first_transcript_is_system_grounding_context_then_task() -> None:
    requests: list[ChatRequest] = []
    grounder = FakeGrounder("[runbook] rotate every 90d")
    ctx = make_test_ctx(llm=FakeLLM("ok"), chat_middleware=[capture(requests)])
    agent = Agent("a", model="m", system="You are an SRE.", grounder=grounder, temperature=0.2, max_tokens=50)
    seed = [Message("user", "earlier question"), Message("assistant", "earlier answer")]
    await agent.run("Why did the deploy fail?", ctx, context=seed)
    (request,) = requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "You are an SRE."),
        ("system", "[runbook] rotate every 90d"),
        ("user", "earlier question"),
        ("assistant", "earlier answer"),
        ("user", "Why did the deploy fail?"),
    ]
    assert (request.model, request.temperature, request.max_tokens, request.tools) == ("m", 0.2, 50, None)
    assert grounder.calls == [(ctx, "Why did the deploy fail?")]


async def test_context_may_be_an_object_holding_messages() -> None:
    @dataclass
    class WorkingContext:
        messages: list[Message]

    requests: list[ChatRequest] = []
    ctx = make_test_ctx(llm=FakeLLM("ok"), chat_middleware=[capture(requests)])
    await Agent("a", model="m").run("task", ctx, context=WorkingContext([Message("user", "seed")]))
    assert [m.content for m in requests[0].messages] == ["seed", "task"]
    with pytest.raises(TypeError, match="Message"):
        await Agent("a", model="m").run("task", ctx, context=["not a message"])


async def test_empty_grounding_adds_no_message() -> None:
    requests: list[ChatRequest] = []
    ctx = make_test_ctx(llm=FakeLLM("ok"), chat_middleware=[capture(requests)])
    await Agent("a", model="m", grounder=FakeGrounder("")).run("task", ctx)
    assert [m.content for m in requests[0].messages] == ["task"]


async def test_the_compactor_runs_before_each_model_call() -> None:
    requests: list[ChatRequest] = []
    compactor = FakeCompactor(keep_last=1)
    ctx = make_test_ctx(llm=FakeLLM("ok"), chat_middleware=[capture(requests)])
    await Agent("a", model="m", system="long system prompt", compactor=compactor).run("task", ctx)
    assert compactor.called == 1
    assert [m.content for m in requests[0].messages] == ["task"]


async def test_stream_yields_tokens_then_one_final_event() -> None:
    agent = Agent("a", model="m")
    ctx = make_test_ctx(llm=FakeLLM("a fairly long answer", chunk_size=5))
    events = [event async for event in agent.stream("go", ctx)]
    kinds = [event.kind for event in events]
    assert kinds == [StreamEventKind.MESSAGE_DELTA] * 4 + [StreamEventKind.FINAL]
    assert "".join(e.text for e in events[:-1]) == "a fairly long answer"
    final = events[-1]
    assert final.result.output == "a fairly long answer" and final.usage == final.result.usage
    assert all(e.partial_output is None for e in events)


async def test_the_agent_span_records_how_the_run_ended() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM("ok"), trace=tracer)
    await Agent("analyst", model="fake-model").run("go", ctx)
    invoke, compose = tracer.spans
    assert compose.parent is invoke and invoke.ended and compose.ended
    assert invoke.attrs == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "analyst",
        "gen_ai.request.model": "fake-model",
        "keel.agent.stop_reason": "completed",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
    }


async def test_a_failure_propagates_through_the_agent_span() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM("ok", fail_times=1), trace=tracer)
    with pytest.raises(TimeoutError):
        await Agent("a", model="m").run("go", ctx)
    assert isinstance(tracer.spans[0].error, TimeoutError)


def test_an_agent_needs_a_name_and_a_model() -> None:
    with pytest.raises(ValueError):
        Agent("", model="m")
    with pytest.raises(ValueError):
        Agent("a", model="")
    agent = Agent("a", model="m")
    assert isinstance(agent.cognition, SingleCallCognition)
    assert repr(agent) == "Agent('a', model='m', cognition=SingleCallCognition)"


async def test_a_cognition_without_a_final_event_is_an_error() -> None:
    class Silent:
        async def drive(self, run: Any) -> AsyncIterator[Any]:
            return
            yield

    with pytest.raises(RuntimeError, match="without a final event"):
        await Agent("a", model="m", cognition=Silent()).run("go", make_test_ctx(llm=FakeLLM()))
