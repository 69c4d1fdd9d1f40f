"""RunContext and Services: defaults that work with no arguments, accessors, cancellation, emit."""

from __future__ import annotations

import logging

import pytest

from core.agents.fanout import child_context
from core.contracts.ports import (
    ClockPort,
    MetricsPort,
    Observation,
    ObserverPort,
    TracePort,
)
from core.contracts.protocols import Ctx
from core.contracts.types import Scope
from core.execution.cancellation import CancellationToken, Cancelled
from core.runtime import (
    Autonomy,
    Budget,
    Invoker,
    InvokingContext,
    NoopObserver,
    NoopTrace,
    Quota,
    RunContext,
    Services,
)
from core.runtime.observers import CollectingObserver
from core.state.stores import InMemoryCheckpointStore, InMemoryStore, InMemoryVector
from core.testing import FakeClock, FakeLLM


def test_services_with_no_arguments_is_fully_usable() -> None:
    services = Services()
    assert isinstance(services.trace, TracePort) and isinstance(services.trace, NoopTrace)
    assert isinstance(services.observer, ObserverPort) and isinstance(services.observer, NoopObserver)
    assert isinstance(services.metrics, MetricsPort)
    assert isinstance(services.clock, ClockPort)
    assert services.invoker is None and services.store is None and services.vector is None
    assert services.checkpointer is None and services.asker is None
    with services.trace.span("s", "internal", {"k": 1}) as span:
        span.set_attribute("a", 1)
        span.add_event("e", {"x": 1})
    services.metrics.add_counter("c")
    services.metrics.record_histogram("h", 1.5)
    assert services.clock.now() > 1e9


def test_each_services_gets_its_own_defaults() -> None:
    assert Services().observer is not Services().observer


async def test_a_default_run_context_works_and_satisfies_ctx() -> None:
    ctx = RunContext()
    assert isinstance(ctx, Ctx)
    assert ctx.scope == Scope() and ctx.autonomy == Autonomy.AUTO and ctx.depth == 0
    assert ctx.correlation_id and ctx.correlation_id != RunContext().correlation_id
    assert ctx.all_meters == [ctx.budget]
    ctx.check_cancelled()
    await ctx.emit("step", "nothing listens")
    with ctx.trace.span("x"):
        pass


def test_accessors_read_through_to_services() -> None:
    store, vector, checkpointer = InMemoryStore(), InMemoryVector(), InMemoryCheckpointStore()
    clock, asker = FakeClock(), object()
    services = Services(store=store, vector=vector, checkpointer=checkpointer, asker=asker, clock=clock)
    ctx = RunContext(services=services)
    assert ctx.store is store and ctx.vector is vector and ctx.checkpointer is checkpointer
    assert ctx.asker is asker and ctx.clock is clock
    assert ctx.trace is services.trace and ctx.observer is services.observer
    assert ctx.metrics is services.metrics
    assert ctx.invoker is None


def test_all_meters_puts_the_budget_first() -> None:
    quota = Quota(max_calls=5)
    budget = Budget(max_calls=3)
    ctx = RunContext(budget=budget, meters=[quota])
    assert ctx.all_meters == [budget, quota]


def test_autonomy_accepts_the_plain_strings_and_refuses_others() -> None:
    assert RunContext(autonomy="manual").autonomy is Autonomy.MANUAL
    assert str(RunContext(autonomy="gated").autonomy) == "gated"
    with pytest.raises(ValueError):
        RunContext(autonomy="yolo")


def test_check_cancelled_raises_once_the_token_is_cancelled() -> None:
    token = CancellationToken()
    ctx = RunContext(cancel=token)
    ctx.check_cancelled()
    token.cancel("user pressed stop")
    with pytest.raises(Cancelled, match="user pressed stop"):
        ctx.check_cancelled()


def test_a_child_shares_the_run_and_its_token_is_a_child() -> None:
    parent = RunContext(scope=Scope(1, 2), correlation_id="r", meters=[Quota()])
    child = parent.child()
    assert child.depth == 1 and child.correlation_id == "r" and child.scope == Scope(1, 2)
    assert child.budget is parent.budget and child.services is parent.services
    assert child.meters is parent.meters
    child.cancel.cancel()
    parent.check_cancelled()  # a child cancelling itself does not stop the parent
    sibling = parent.child()
    parent.cancel.cancel()
    with pytest.raises(Cancelled):
        sibling.check_cancelled()


def test_an_invoking_context_is_refused_without_an_invoker() -> None:
    with pytest.raises(ValueError, match="needs services.invoker"):
        InvokingContext()


def test_an_invoking_context_and_its_children_keep_the_invoker() -> None:
    invoker = Invoker(llm=FakeLLM())
    parent = InvokingContext(services=Services(invoker=invoker), correlation_id="r")
    assert parent.invoker is invoker
    child = parent.child()
    assert isinstance(child, InvokingContext) and child.invoker is invoker and child.depth == 1
    carved = child_context(parent, Budget(max_calls=1))
    assert isinstance(carved, InvokingContext) and carved.invoker is invoker
    assert carved.meters == [parent.budget] and carved.depth == 1
    parent.services.invoker = None
    with pytest.raises(ValueError, match="set to None after construction"):
        parent.invoker  # noqa: B018


async def test_emit_publishes_an_observation_stamped_with_the_run() -> None:
    sink = CollectingObserver()
    clock = FakeClock(start=100.0)
    ctx = RunContext(services=Services(observer=sink, clock=clock), correlation_id="run-7")
    await ctx.emit("result", "done", payload={"ok": True}, agent="analyst", parent_id="p1")
    (item,) = sink.items
    assert isinstance(item, Observation)
    assert (item.kind, item.render, item.payload, item.agent) == ("result", "done", {"ok": True}, "analyst")
    assert (item.correlation_id, item.parent_id, item.created_at) == ("run-7", "p1", 100.0)
    assert item.id


class _BrokenObserver:
    async def emit(self, observation: Observation) -> None:
        raise ConnectionError("observer backend down")

    async def close(self) -> None:
        return None


async def test_a_failing_observer_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    ctx = RunContext(services=Services(observer=_BrokenObserver()))
    with caplog.at_level(logging.WARNING):
        await ctx.emit("step", "x")
    assert "observer failed" in caplog.text
