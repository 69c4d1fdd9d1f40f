"""make_test_ctx builds a real RunContext; every knob is wired, and its rules hold."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.contracts.types import Scope
from core.execution.cancellation import CancellationToken
from core.policies import meter
from core.runtime import (
    Budget,
    Invoker,
    InvokingContext,
    NoopMetrics,
    NoopObserver,
    NoopTrace,
    Quota,
    RunContext,
)
from core.runtime.observers import CollectingObserver
from core.state.stores import InMemoryCheckpointStore, InMemoryStore, InMemoryVector
from core.testing import FakeClock, FakeLLM, RecordingTracer, make_test_ctx


def test_the_no_argument_form_is_usable() -> None:
    ctx = make_test_ctx()
    assert isinstance(ctx, RunContext) and not isinstance(ctx, InvokingContext)
    assert ctx.services.invoker is None and ctx.invoker is None
    assert isinstance(ctx.trace, NoopTrace) and isinstance(ctx.observer, NoopObserver)
    assert isinstance(ctx.metrics, NoopMetrics)
    assert ctx.scope == Scope() and ctx.correlation_id == "test-run" and ctx.autonomy == "auto"
    assert ctx.budget.max_cost_usd is None and ctx.meters == []
    ctx.check_cancelled()


async def test_llm_is_wrapped_in_a_real_invoker_with_both_chains() -> None:
    chat, tool = [meter()], [meter()]
    llm = FakeLLM("ok")
    ctx = make_test_ctx(llm=llm, chat_middleware=chat, tool_middleware=tool)
    assert isinstance(ctx, InvokingContext)
    assert isinstance(ctx.invoker, Invoker) and ctx.invoker.llm is llm
    assert ctx.invoker.chat_middleware == tuple(chat) and ctx.invoker.tool_middleware == tuple(tool)


def test_every_knob_is_wired() -> None:
    store, vector, checkpointer = InMemoryStore(), InMemoryVector(), InMemoryCheckpointStore()
    observer, tracer, clock, token = CollectingObserver(), RecordingTracer(), FakeClock(), CancellationToken()
    budget, quota, asker = Budget(max_cost_usd=Decimal("1")), Quota(max_calls=1), object()
    metrics = NoopMetrics()
    ctx = make_test_ctx(
        llm=FakeLLM(),
        scope=Scope(3, 4),
        budget=budget,
        store=store,
        vector=vector,
        checkpointer=checkpointer,
        asker=asker,
        observer=observer,
        trace=tracer,
        metrics=metrics,
        clock=clock,
        cancel=token,
        meters=[quota],
        correlation_id="run-1",
        autonomy="gated",
    )
    assert ctx.scope == Scope(3, 4) and ctx.budget is budget and ctx.all_meters == [budget, quota]
    assert ctx.store is store and ctx.vector is vector and ctx.checkpointer is checkpointer
    assert ctx.asker is asker and ctx.observer is observer and ctx.trace is tracer
    assert ctx.metrics is metrics and ctx.clock is clock and ctx.cancel is token
    assert ctx.correlation_id == "run-1" and ctx.autonomy == "gated"


def test_a_built_invoker_is_used_as_is() -> None:
    invoker = Invoker(llm=FakeLLM())
    ctx = make_test_ctx(invoker=invoker)
    assert isinstance(ctx, InvokingContext) and ctx.invoker is invoker


def test_llm_and_invoker_together_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="llm= or invoker=, not both"):
        make_test_ctx(llm=FakeLLM(), invoker=Invoker(llm=FakeLLM()))


def test_middleware_that_would_be_ignored_is_refused() -> None:
    with pytest.raises(ValueError, match="ignored"):
        make_test_ctx(invoker=Invoker(llm=FakeLLM()), chat_middleware=[meter()])
    with pytest.raises(ValueError, match="llm="):
        make_test_ctx(tool_middleware=[meter()])


def test_an_unknown_autonomy_is_refused() -> None:
    with pytest.raises(ValueError):
        make_test_ctx(autonomy="reckless")


def test_each_context_gets_fresh_defaults() -> None:
    a, b = make_test_ctx(), make_test_ctx()
    assert a.budget is not b.budget and a.cancel is not b.cancel and a.services is not b.services
