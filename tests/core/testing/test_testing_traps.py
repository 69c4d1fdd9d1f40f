"""Each trap the testing document warns about: the test that passes while proving nothing, beside the
test written the right way, which fails when the behaviour breaks."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.agents import Agent, InvokerMissing, StopReason
from core.agents.cognition import ReActCognition
from core.contracts.types import ChatRequest, Message, ToolCall
from core.policies import idempotent, memoize, meter, retry, semantic_memoize, tracing
from core.runtime import Budget, RunContext, Services
from core.state.stores import InMemoryStore, InMemoryVector
from core.testing import (
    FakeClock,
    FakeLLM,
    FakeTool,
    RecordingTracer,
    ScriptExhausted,
    Turn,
    make_test_ctx,
)
from core.testing.llm import DEFAULT_USAGE

# ---- a dict key that never matches answers "{}" --------------------------------------------------


async def test_an_unmatched_dict_key_answers_braces_so_assert_on_the_exact_output() -> None:
    llm = FakeLLM({"wether": "It is raining."})  # the typo
    result = await Agent("a", model="fake-model").run("what is the weather", make_test_ctx(llm=llm))

    # The trap: a structured-output style assertion passes on the fallback.
    assert result.output.startswith("{")
    # The right way: assert on the answer itself, which exposes the typo.
    assert result.output != "It is raining."
    fixed = FakeLLM({"weather": "It is raining."})
    result = await Agent("a", model="fake-model").run("what is the weather", make_test_ctx(llm=fixed))
    assert result.output == "It is raining."


# ---- observer / trace default to None in make_test_ctx ---------------------------------------------


def test_forwarding_none_to_services_clobbers_the_noop_defaults() -> None:
    # The trap: Services(trace=None) replaces NoopTrace with None.
    broken = RunContext(services=Services(trace=None, observer=None))  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        broken.trace.span("x")
    # The right way: make_test_ctx leaves them out when unset, so the no-op objects stay.
    ctx = make_test_ctx(trace=None, observer=None)
    with ctx.trace.span("x", "internal"):
        pass
    assert ctx.trace is not None and ctx.observer is not None


# ---- caching policies need their store -------------------------------------------------------------


async def test_idempotent_without_a_store_runs_the_tool_every_time() -> None:
    def send(args: dict[str, object]) -> str:
        return "sent"

    script = [
        Turn(tool_calls=(ToolCall("c1", "send_email", {"to": "ops"}),)),
        Turn(tool_calls=(ToolCall("c2", "send_email", {"to": "ops"}),)),
        Turn(content="done"),
    ]
    for store, expected_sends in ((None, 2), (InMemoryStore(), 1)):
        tool = FakeTool("send_email", responder=send, side_effecting=True)
        ctx = make_test_ctx(llm=FakeLLM.script(script), store=store, tool_middleware=[idempotent()])
        agent = Agent("a", model="fake-model", cognition=ReActCognition(tools=[tool]))
        result = await agent.run("notify ops twice", ctx)
        assert result.output == "done"
        assert len(tool.calls) == expected_sends


async def test_semantic_memoize_without_a_vector_index_is_a_no_op() -> None:
    for vector, expected_calls in ((None, 2), (InMemoryVector(), 1)):
        llm = FakeLLM("Rotate every 90 days.")
        ctx = make_test_ctx(llm=llm, vector=vector, chat_middleware=[semantic_memoize(threshold=0.8)])
        agent = Agent("a", model="fake-model")
        await agent.run("How often should I rotate the cert?", ctx)
        await agent.run("how often should i rotate the cert", ctx)
        assert llm.calls == expected_calls


async def test_memoize_output_is_identical_either_way_so_only_the_call_count_tells() -> None:
    outputs = []
    for store in (None, InMemoryStore()):
        llm = FakeLLM("cached?")
        ctx = make_test_ctx(llm=llm, store=store, chat_middleware=[memoize()])
        agent = Agent("a", model="fake-model")
        outputs.append([(await agent.run("q", ctx)).output for _ in range(2)])
    assert outputs[0] == outputs[1] == ["cached?", "cached?"]


# ---- a budget stops nothing without meter() -------------------------------------------------------


async def test_a_budget_stops_a_run_only_when_meter_is_in_the_chain() -> None:
    def looping() -> FakeLLM:
        return FakeLLM.script([Turn(tool_calls=(ToolCall("c", "ping", {}),))], repeat_last=True)

    # The trap: the budget is installed but never charged, so max_iterations ends the run instead.
    llm = looping()
    ctx = make_test_ctx(llm=llm, budget=Budget(max_calls=2))
    loop = ReActCognition([FakeTool("ping", "pong")], max_iterations=5)
    agent = Agent("a", model="fake-model", cognition=loop)
    result = await agent.run("go", ctx)
    assert result.reason == StopReason.MAX_ITERATIONS and llm.calls == 5 and ctx.budget.calls == 0

    # The right way: meter() charges it, and the budget is what stops the run.
    llm = looping()
    ctx = make_test_ctx(llm=llm, budget=Budget(max_calls=2), chat_middleware=[meter()])
    result = await agent.run("go", ctx)
    assert result.stopped and result.reason == StopReason.BUDGET_EXHAUSTED
    assert llm.calls == 2 and ctx.budget.calls == 2


# ---- ScriptExhausted is a BaseException, so nothing on the way swallows it ------------------------


async def test_script_exhausted_passes_through_retry_and_the_tool_loop() -> None:
    assert not issubclass(ScriptExhausted, Exception)
    llm = FakeLLM.script([Turn(tool_calls=(ToolCall("c", "ping", {}),))])
    ctx = make_test_ctx(llm=llm, chat_middleware=[retry(max_attempts=5, sleep=FakeClock().sleep)])
    agent = Agent("a", model="fake-model", cognition=ReActCognition([FakeTool("ping", "pong")]))
    with pytest.raises(ScriptExhausted, match="has 1 turn"):
        await agent.run("go", ctx)
    assert llm.calls == 2  # no retry of the exhausted call


# ---- one FakeLLM shared across runs keeps counting -----------------------------------------------


async def test_fail_times_counts_across_runs_of_one_fake() -> None:
    shared = FakeLLM("ok", fail_times=2)
    agent = Agent("a", model="fake-model")
    ctx = make_test_ctx(llm=shared)
    # The trap: the latch lives on the instance, so fail_times=2 fails two calls in total (here the
    # first two runs), not two calls per run.
    with pytest.raises(TimeoutError):
        await agent.run("go", ctx)
    with pytest.raises(TimeoutError):
        await agent.run("go", ctx)
    assert (await agent.run("go", ctx)).output == "ok"
    # The right way: a fresh fake per scenario fails exactly as configured in each.
    for _ in range(2):
        fresh = FakeLLM("ok", fail_times=1)
        fresh_ctx = make_test_ctx(llm=fresh, chat_middleware=[retry(max_attempts=2, sleep=FakeClock().sleep)])
        assert (await agent.run("go", fresh_ctx)).output == "ok"
        assert fresh.calls == 2


# ---- FakeLLM ignores tools= ----------------------------------------------------------------------


async def test_fake_llm_cannot_tell_which_tools_were_offered_but_a_traced_span_can() -> None:
    request = ChatRequest([Message("user", "hi")], "m")
    llm = FakeLLM("same")
    offered = await llm.chat(messages=request.messages, model="m", tools=[FakeTool("search").schema])
    bare = await llm.chat(messages=request.messages, model="m")
    assert offered.content == bare.content  # the trap: identical either way

    tracer = RecordingTracer()
    ctx = make_test_ctx(llm=FakeLLM("done"), trace=tracer, chat_middleware=[tracing()])
    agent = Agent("a", model="fake-model", cognition=ReActCognition([FakeTool("search"), FakeTool("fetch")]))
    await agent.run("go", ctx)
    (chat,) = tracer.by_name("chat")
    assert chat.attrs["keel.request.tools"] == ["search", "fetch"]


# ---- make_test_ctx() without llm= has no invoker ---------------------------------------------------


async def test_running_an_agent_without_llm_fails_on_the_missing_invoker() -> None:
    ctx = make_test_ctx()
    assert ctx.services.invoker is None
    with pytest.raises(AttributeError, match="make_test_ctx\\(llm=...\\)"):
        await Agent("a", model="fake-model").run("go", ctx)
    with pytest.raises(InvokerMissing):
        await Agent("a", model="fake-model").run("go", ctx)
    result = await Agent("a", model="fake-model").run("go", make_test_ctx(llm=FakeLLM("ok")))
    assert result.output == "ok"


async def test_default_usage_is_what_the_budget_example_relies_on() -> None:
    assert (DEFAULT_USAGE.input_tokens, DEFAULT_USAGE.output_tokens) == (10, 5)
    budget = Budget(max_cost_usd=Decimal("0.10"))
    ctx = make_test_ctx(llm=FakeLLM("ok"), budget=budget, chat_middleware=[meter()])
    for _ in range(3):
        await Agent("a", model="fake-model").run("go", ctx)
    assert budget.spent() == Decimal("0.000300") and budget.calls == 3
