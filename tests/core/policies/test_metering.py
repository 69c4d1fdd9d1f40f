"""meter(): guard every meter before a call, charge every meter from the call's usage after it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.contracts.types import ChatRequest, Message, Scope, ToolRequest, Usage
from core.policies import meter
from core.runtime import Budget, MeterExceeded, Quota
from core.testing import FakeLLM, FakeTool, make_test_ctx

REQUEST = ChatRequest([Message("user", "hi")], "m")


async def test_charges_the_budget_and_every_extra_meter() -> None:
    quota = Quota(max_calls=10)
    scope = Scope(9, 1)
    ctx = make_test_ctx(llm=FakeLLM("ok"), scope=scope, meters=[quota], chat_middleware=[meter()])
    for _ in range(2):
        await ctx.invoker.chat(REQUEST, ctx)
    assert ctx.budget.calls == 2 and ctx.budget.spent() == Decimal("0.000200")
    assert quota.usage_for(scope).calls == 2 and quota.usage_for(scope).tokens == 30


async def test_a_guard_refuses_the_call_before_the_provider_is_asked() -> None:
    llm = FakeLLM("ok")
    ctx = make_test_ctx(llm=llm, budget=Budget(max_calls=1), chat_middleware=[meter()])
    await ctx.invoker.chat(REQUEST, ctx)
    with pytest.raises(MeterExceeded, match="1 of 1 calls"):
        await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 1


async def test_the_crossing_call_is_delivered_then_the_meter_raises() -> None:
    llm = FakeLLM("expensive", usage=Usage(100, 100, cost_usd=0.5))
    ctx = make_test_ctx(llm=llm, budget=Budget(max_cost_usd="0.10"), chat_middleware=[meter()])
    received: list[str] = []
    with pytest.raises(MeterExceeded, match="spent"):
        async for delta in ctx.invoker.stream(REQUEST, ctx):
            received.append(delta.text)
    assert "".join(received) == "expensive"
    assert ctx.budget.spent() == Decimal("0.500000")


async def test_every_meter_is_charged_even_when_the_first_one_crosses() -> None:
    quota = Quota()
    budget = Budget(max_cost_usd="0.00005")  # the guard lets the first call through; its charge crosses
    ctx = make_test_ctx(llm=FakeLLM("ok"), budget=budget, meters=[quota], chat_middleware=[meter()])
    with pytest.raises(MeterExceeded, match="budget exceeded"):
        await ctx.invoker.chat(REQUEST, ctx)
    assert budget.calls == 1 and quota.usage_for(Scope()).calls == 1


async def test_a_stream_without_usage_still_counts_as_a_call() -> None:
    llm = FakeLLM("ok", usage=Usage())
    ctx = make_test_ctx(llm=llm, chat_middleware=[meter()])
    await ctx.invoker.chat(REQUEST, ctx)
    assert ctx.budget.calls == 1 and ctx.budget.spent() == Decimal(0)


async def test_a_failed_call_is_not_charged() -> None:
    llm = FakeLLM("ok", fail_times=1)
    ctx = make_test_ctx(llm=llm, chat_middleware=[meter()])
    with pytest.raises(TimeoutError):
        await ctx.invoker.chat(REQUEST, ctx)
    assert ctx.budget.calls == 0


async def test_tool_calls_are_guarded_but_not_charged() -> None:
    tool = FakeTool("t", responder="r")
    budget = Budget(max_calls=1)
    ctx = make_test_ctx(llm=FakeLLM(), budget=budget, tool_middleware=[meter()])
    request = ToolRequest("t", {}, tool=tool)
    assert await ctx.invoker.tool(request, ctx) == "r"
    assert budget.calls == 0
    budget.charge(Usage())
    with pytest.raises(MeterExceeded):
        await ctx.invoker.tool(request, ctx)
    assert len(tool.calls) == 1
