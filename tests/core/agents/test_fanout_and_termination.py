"""run_agents carves child budgets before dispatch; a TerminationCondition is a returned stop."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from core.agents import (
    Agent,
    AgentTask,
    MaxModelCalls,
    ReActCognition,
    StopReason,
    StopWhen,
    TextMentions,
    run_agents,
)
from core.agents.fanout import carve_budgets
from core.contracts.errors import Failure
from core.contracts.types import ToolCall, Usage
from core.policies import meter
from core.runtime import Budget
from core.testing import FakeLLM, FakeTool, Turn, make_test_ctx

COSTLY = Usage(input_tokens=1, output_tokens=1, cost_usd=0.04)


def test_carving_splits_what_is_left_exactly() -> None:
    parent = Budget(max_cost_usd=Decimal("0.10"), max_calls=7)
    parent.charge(Usage(cost_usd=0.01))
    shares = carve_budgets(parent, 3)
    assert [b.max_cost_usd for b in shares] == [Decimal("0.030000")] * 3
    assert [b.max_calls for b in shares] == [2, 2, 2]
    assert carve_budgets(Budget(), 2)[0].max_cost_usd is None


async def test_children_get_their_own_budget_and_charge_the_parent() -> None:
    llm = FakeLLM("ok", usage=COSTLY)
    ctx = make_test_ctx(llm=llm, budget=Budget(max_cost_usd=Decimal("0.10")), chat_middleware=[meter()])
    looping = ReActCognition(tools=[FakeTool("t")], max_iterations=5)
    script = FakeLLM.script([Turn(tool_calls=(ToolCall("c", "t", {}),), usage=COSTLY)], repeat_last=True)
    results = await run_agents(
        [(Agent("a", model="m"), "one"), (Agent("b", model="m"), "two")],
        ctx,
    )
    assert [r.output for r in results] == ["ok", "ok"]
    assert ctx.budget.spent() == Decimal("0.080000") and ctx.budget.calls == 2
    # A child whose own share (0.05) is crossed stops without touching its sibling's share.
    ctx = make_test_ctx(llm=script, budget=Budget(max_cost_usd=Decimal("0.10")), chat_middleware=[meter()])
    results = await run_agents(
        [AgentTask(Agent("greedy", model="m", cognition=looping), "loop"), (Agent("b", model="m"), "x")], ctx
    )
    assert results[0].reason is StopReason.BUDGET_EXHAUSTED
    assert results[0].usage.cost_usd == pytest.approx(0.08)


async def test_an_explicit_budget_is_used_as_given_and_best_effort_returns_failures() -> None:
    ctx = make_test_ctx(llm=FakeLLM(fail_times=1, fail_exc=RuntimeError("boom")), chat_middleware=[meter()])
    own = Budget(max_calls=5)
    results = await run_agents(
        [AgentTask(Agent("a", model="m"), "x", budget=own), (Agent("b", model="m"), "y")],
        ctx,
        best_effort=True,
        limit=1,
    )
    assert isinstance(results[0], Failure) and "boom" in str(results[0].cause)
    assert not isinstance(results[1], Failure) and results[1].output == "{}"
    assert own.calls == 0


async def test_a_failing_child_surfaces_as_an_exception_group() -> None:
    ctx = make_test_ctx(llm=FakeLLM(fail_times=1, fail_exc=RuntimeError("boom")))
    with pytest.raises(BaseExceptionGroup):
        await run_agents([(Agent("a", model="m"), "x")], ctx)


async def test_cancelling_the_parent_reaches_every_child() -> None:
    ctx = make_test_ctx(llm=FakeLLM("ok"))
    ctx.cancel.cancel()
    results = await run_agents([(Agent("a", model="m"), "x"), (Agent("b", model="m"), "y")], ctx)
    assert [r.reason for r in results] == [StopReason.CANCELLED, StopReason.CANCELLED]


async def test_a_termination_condition_returns_a_stop_not_an_error() -> None:
    tool = FakeTool("search", responder="nothing yet")
    llm = FakeLLM.script(
        [Turn(content="thinking", tool_calls=(ToolCall("c", "search", {}),))], repeat_last=True
    )
    agent = Agent("a", model="m", cognition=ReActCognition(tools=[tool], max_iterations=50))
    result = await agent.run("go", make_test_ctx(llm=llm), until=MaxModelCalls(3))
    assert result.reason is StopReason.TERMINATED and result.stopped
    assert result.error == "3 model call(s) made (the limit is 3)"
    assert llm.calls == 3 and result.output == "thinking"


async def test_conditions_compose_and_are_not_checked_on_a_finished_run() -> None:
    llm = FakeLLM("the answer is DONE")
    result = await Agent("a", model="m").run("go", make_test_ctx(llm=llm), until=TextMentions("DONE"))
    assert result.reason is StopReason.TERMINATED and result.error == "the answer mentions 'DONE'"
    never = StopWhen(lambda event, run: False, "never")
    result = await Agent("a", model="m").run(
        "go", make_test_ctx(llm=FakeLLM("x")), until=never | MaxModelCalls(5)
    )
    assert result.reason is StopReason.COMPLETED
    both = TextMentions("x") & StopWhen(lambda event, run: True, "always")
    result = await Agent("a", model="m").run("go", make_test_ctx(llm=FakeLLM("x")), until=both)
    assert result.error == "the answer mentions 'x' and always"


def test_run_agents_is_usable_from_a_fresh_loop() -> None:
    ctx = make_test_ctx(llm=FakeLLM("ok"))
    results = asyncio.run(run_agents([(Agent("a", model="m"), "x")], ctx))
    assert results[0].output == "ok"
