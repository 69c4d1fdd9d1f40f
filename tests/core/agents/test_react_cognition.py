"""ReActCognition: a tool loop driven by a scripted FakeLLM, and the ways a run ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest

from core.agents import Agent, StopReason
from core.agents.cognition import ReActCognition, render_tool_result
from core.contracts.types import Delta, StreamEventKind, ToolCall, Usage
from core.execution.cancellation import CancellationToken, Cancelled
from core.policies import meter
from core.runtime import Budget
from core.runtime.observers import CollectingObserver
from core.testing import FakeLLM, FakeTool, Turn, make_test_ctx


def sre(*tools: FakeTool, max_iterations: int = 10) -> Agent:
    return Agent(
        "sre", model="fake-model", cognition=ReActCognition(list(tools), max_iterations=max_iterations)
    )


async def test_a_loop_over_several_tools() -> None:
    dns = FakeTool("resolve", responder=lambda args: {"ip": "10.0.0.7", "host": args["host"]})
    cert = FakeTool("lookup_cert", responder={"notAfter": "2026-08-01"})
    logs = FakeTool("tail_logs", responder="x509: certificate has expired")
    llm = FakeLLM.script(
        [
            Turn(tool_calls=[ToolCall("c1", "resolve", {"host": "example.com"})]),
            Turn(
                content="Checking the certificate and the logs.",
                tool_calls=[
                    ToolCall("c2", "lookup_cert", {"ip": "10.0.0.7"}),
                    ToolCall("c3", "tail_logs", {"service": "web", "lines": 1}),
                ],
            ),
            Turn(content="The certificate expired on 2026-08-01."),
        ]
    )
    ctx = make_test_ctx(llm=llm)

    result = await sre(dns, cert, logs).run("Why did the deploy fail?", ctx)

    assert result.output == "The certificate expired on 2026-08-01." and not result.stopped
    assert llm.calls == 3 and result.model_calls == 3
    assert dns.calls == [{"host": "example.com"}] and cert.calls == [{"ip": "10.0.0.7"}]
    assert logs.calls == [{"service": "web", "lines": 1}]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 15)
    transcript = [(m.role, m.content, m.tool_call_id) for m in result.messages]
    assert transcript == [
        ("user", "Why did the deploy fail?", None),
        ("assistant", "", None),
        ("tool", '{"ip": "10.0.0.7", "host": "example.com"}', "c1"),
        ("assistant", "Checking the certificate and the logs.", None),
        ("tool", '{"notAfter": "2026-08-01"}', "c2"),
        ("tool", "x509: certificate has expired", "c3"),
        ("assistant", "The certificate expired on 2026-08-01.", None),
    ]
    assert [tc.name for tc in result.messages[3].tool_calls] == ["lookup_cert", "tail_logs"]
    assert result.messages[2].name == "resolve"


async def test_the_model_is_offered_every_tool_schema() -> None:
    offered: list[Any] = []

    class Spy(FakeLLM):
        async def stream(self, **kwargs: Any) -> AsyncIterator[Delta]:
            offered.append([tool.name for tool in kwargs["tools"]])
            async for delta in super().stream(**kwargs):
                yield delta

    await sre(FakeTool("a"), FakeTool("b")).run("go", make_test_ctx(llm=Spy("done")))
    assert offered == [["a", "b"]]


async def test_stream_events_follow_the_loop() -> None:
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "ping", {})]), Turn(content="pong received")])
    events = [e async for e in sre(FakeTool("ping", "pong")).stream("go", make_test_ctx(llm=llm))]
    kinds = [e.kind for e in events]
    assert kinds == [
        StreamEventKind.TOOL_CALL,
        StreamEventKind.TOOL_RESULT,
        StreamEventKind.MESSAGE_DELTA,
        StreamEventKind.MESSAGE_DELTA,
        StreamEventKind.FINAL,
    ]
    assert events[0].tool_call == ToolCall("c1", "ping", {})
    assert events[1].tool_result == "pong" and events[1].tool_call is not None
    assert events[-1].result.output == "pong received"


async def test_a_failing_tool_becomes_a_tool_message_and_the_loop_goes_on() -> None:
    broken = FakeTool("lookup_cert", responder=ConnectionError("tls handshake timed out"))
    llm = FakeLLM.script(
        [
            Turn(tool_calls=[ToolCall("c1", "lookup_cert", {"host": "example.com"})]),
            Turn(content="I could not reach the host."),
        ]
    )
    result = await sre(broken).run("check", make_test_ctx(llm=llm))
    assert result.output == "I could not reach the host." and not result.stopped
    tool_message = result.messages[2]
    assert tool_message.role == "tool" and tool_message.tool_call_id == "c1"
    assert tool_message.content == "error: ConnectionError: tls handshake timed out"


async def test_an_unknown_tool_is_reported_to_the_model() -> None:
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "rm_rf", {})]), Turn(content="ok")])
    result = await sre(FakeTool("ls")).run("go", make_test_ctx(llm=llm))
    assert result.messages[2].content == "error: there is no tool named 'rm_rf' (available: ls)"


async def test_max_iterations_stops_a_loop_that_never_answers() -> None:
    llm = FakeLLM.script([Turn(content="thinking", tool_calls=[ToolCall("c", "ping", {})])], repeat_last=True)
    ping = FakeTool("ping", "pong")
    result = await sre(ping, max_iterations=3).run("go", make_test_ctx(llm=llm))
    assert result.stopped and result.reason is StopReason.MAX_ITERATIONS
    assert result.output == "thinking" and "3 model call" in (result.error or "")
    assert llm.calls == 3 and len(ping.calls) == 3 and llm.turns_used == 3


async def test_a_cost_budget_stops_the_run_with_a_clear_result() -> None:
    llm = FakeLLM.script(
        [Turn(content="step", tool_calls=[ToolCall("c", "ping", {})], usage=Usage(100, 50, cost_usd=0.01))],
        repeat_last=True,
    )
    budget = Budget(max_cost_usd=Decimal("0.025"))
    ctx = make_test_ctx(llm=llm, budget=budget, chat_middleware=[meter()])
    ping = FakeTool("ping", "pong")

    result = await sre(ping).run("go", ctx)

    assert result.stopped and result.reason is StopReason.BUDGET_EXHAUSTED
    assert "budget exceeded" in (result.error or "")
    assert llm.calls == 3 and len(ping.calls) == 2  # the third answer crossed the ceiling
    assert result.output == "step" and result.model_calls == 3
    assert result.usage.input_tokens == 300 and budget.spent() == Decimal("0.030000")


async def test_a_budget_already_exhausted_costs_no_call() -> None:
    budget = Budget(max_calls=0)
    llm = FakeLLM("never")
    ctx = make_test_ctx(llm=llm, budget=budget, chat_middleware=[meter()])
    result = await sre().run("go", ctx)
    assert result.reason is StopReason.BUDGET_EXHAUSTED and llm.calls == 0 and result.output == ""


async def test_a_cancelled_token_stops_the_run_before_any_call() -> None:
    token = CancellationToken()
    token.cancel("user pressed stop")
    llm = FakeLLM("never")
    result = await sre().run("go", make_test_ctx(llm=llm, cancel=token))
    assert result.stopped and result.reason is StopReason.CANCELLED
    assert result.error == "cancelled: user pressed stop" and llm.calls == 0


async def test_cancellation_is_honoured_at_the_next_safe_point() -> None:
    token = CancellationToken()

    def cancel_then_answer(args: dict[str, Any]) -> str:
        token.cancel("operator")
        return "done"

    llm = FakeLLM.script(
        [
            Turn(tool_calls=[ToolCall("c1", "stop_button", {}), ToolCall("c2", "other", {})]),
            Turn(content="never reached"),
        ]
    )
    other = FakeTool("other", "x")
    ctx = make_test_ctx(llm=llm, cancel=token)
    result = await sre(FakeTool("stop_button", cancel_then_answer), other).run("go", ctx)
    assert result.reason is StopReason.CANCELLED
    assert llm.calls == 1 and other.calls == []  # stopped before the next tool and the next call


async def test_cancelled_raised_inside_a_tool_is_not_a_tool_failure() -> None:
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "sub_agent", {})]), Turn(content="x")])
    tool = FakeTool("sub_agent", responder=Cancelled("parent stopped"))
    result = await sre(tool).run("go", make_test_ctx(llm=llm))
    assert result.reason is StopReason.CANCELLED and llm.calls == 1


async def test_task_cancellation_is_not_turned_into_a_result() -> None:
    ctx = make_test_ctx(llm=FakeLLM("slow", delay=30))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(sre().run("go", ctx), timeout=0.01)


async def test_each_tool_run_is_a_step_observation() -> None:
    sink = CollectingObserver()
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c1", "ping", {})]), Turn(content="ok")])
    await sre(FakeTool("ping", "pong")).run("go", make_test_ctx(llm=llm, observer=sink))
    (step,) = sink.items
    assert (step.kind, step.render, step.agent) == ("step", "tool ping", "sre")
    assert step.payload == {"tool": "ping", "call_id": "c1"}


def test_render_tool_result() -> None:
    assert render_tool_result(None) == ""
    assert render_tool_result("text") == "text"
    assert render_tool_result({"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert render_tool_result(Decimal("1.5")) == '"1.5"'


def test_cognition_configuration_is_checked() -> None:
    with pytest.raises(ValueError):
        ReActCognition([], max_iterations=0)
    with pytest.raises(ValueError, match="'a'"):
        ReActCognition([FakeTool("a"), FakeTool("a")])
