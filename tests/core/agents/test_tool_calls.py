"""``run_tool_call``: the one set of rules by which ReActCognition and a resumed durable run run a
tool call the model asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.agents.tool_calls import is_side_effecting, run_tool_call
from core.contracts.middleware import Call, Handler
from core.contracts.ports import ToolPort
from core.contracts.types import ToolCall, ToolRequest
from core.execution.cancellation import Cancelled
from core.runtime import InvokingContext, MeterExceeded
from core.testing import FakeLLM, FakeTool, make_test_ctx


def context(seen: list[ToolRequest]) -> InvokingContext:
    async def spy(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        assert isinstance(call.request, ToolRequest)
        seen.append(call.request)
        async for item in nxt(call):
            yield item

    return make_test_ctx(llm=FakeLLM(), tool_middleware=[spy])


async def test_a_call_runs_through_the_tool_middleware_and_its_value_is_rendered() -> None:
    seen: list[ToolRequest] = []
    tool = FakeTool("lookup", responder={"ip": "10.0.0.7"}, side_effecting=True)
    tools: dict[str, ToolPort] = {"lookup": tool}
    value, text = await run_tool_call(context(seen), ToolCall("c1", "lookup", {"host": "a"}), tools)
    assert (value, text) == ({"ip": "10.0.0.7"}, '{"ip": "10.0.0.7"}')
    (request,) = seen
    assert (request.name, dict(request.arguments), request.call_id) == ("lookup", {"host": "a"}, "c1")
    assert request.tool is tool and request.side_effecting is True


async def test_an_unknown_tool_and_a_failing_tool_are_answers_the_model_sees() -> None:
    seen: list[ToolRequest] = []
    tools: dict[str, ToolPort] = {"b": FakeTool("b", responder=OSError("disk gone")), "a": FakeTool("a")}
    assert await run_tool_call(context(seen), ToolCall("c1", "nope", {}), tools) == (
        "error: there is no tool named 'nope' (available: a, b)",
        "error: there is no tool named 'nope' (available: a, b)",
    )
    assert seen == []
    assert await run_tool_call(context(seen), ToolCall("c2", "b", {}), tools) == (
        "error: OSError: disk gone",
        "error: OSError: disk gone",
    )
    none: dict[str, ToolPort] = {}
    assert (await run_tool_call(context(seen), ToolCall("c3", "x", {}), none))[1].endswith(
        "(available: none)"
    )


@pytest.mark.parametrize("stop", [Cancelled("stop"), MeterExceeded("over budget")])
async def test_a_stop_is_not_a_tool_failure(stop: Exception) -> None:
    tools: dict[str, ToolPort] = {"t": FakeTool("t", responder=stop)}
    with pytest.raises(type(stop)):
        await run_tool_call(context([]), ToolCall("c1", "t", {}), tools)


def test_a_tool_is_side_effecting_unless_it_says_otherwise() -> None:
    class Plain:
        name = "plain"

    assert is_side_effecting(Plain()) is True
    assert is_side_effecting(FakeTool("safe", side_effecting=False)) is False
    assert is_side_effecting(FakeTool("effects", side_effecting=True)) is True
