"""The production null objects satisfy their ports; NullCtx absorbs everything and records nothing."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.contracts.ports import ClockPort, MetricsPort, Observation, ObserverPort, Span, TracePort
from core.contracts.protocols import Ctx
from core.execution.cancellation import Cancelled
from core.runtime import NoopMetrics, NoopObserver, NoopSpan, NoopTrace, NullCtx, SystemClock


def test_the_null_objects_satisfy_their_ports() -> None:
    assert isinstance(NoopTrace(), TracePort)
    assert isinstance(NoopSpan(), Span)
    assert isinstance(NoopObserver(), ObserverPort)
    assert isinstance(NoopMetrics(), MetricsPort)
    assert isinstance(SystemClock(), ClockPort)


async def test_the_null_objects_accept_everything() -> None:
    trace = NoopTrace()
    with trace.span("a", "client", {"k": "v"}) as span:
        span.set_attribute("x", 1)
        span.add_event("e")
        trace.add_event_to_current_span("e2", {"y": 2})
    assert trace.current_span_id() is None
    await NoopObserver().emit(Observation("step"))
    await NoopObserver().close()
    NoopMetrics().add_counter("c", 2, {"t": "x"})
    NoopMetrics().record_histogram("h", 0.5)


async def test_the_system_clock_reads_unix_time_and_sleeps_without_blocking() -> None:
    clock = SystemClock()
    before = time.time()
    assert before <= clock.now() <= time.time()  # unix time, not a monotonic counter
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "other work")
    await clock.sleep(0)
    assert ran == ["other work"]  # the loop ran something else meanwhile


async def test_null_ctx_absorbs_everything() -> None:
    ctx = NullCtx()
    assert isinstance(ctx, Ctx)
    assert ctx.scope.key() == "org0:dom0" and ctx.invoker is None and ctx.store is None
    assert ctx.all_meters == [ctx.budget]
    await ctx.emit("step", "ignored", payload={"a": 1})
    with ctx.trace.span("s"):
        pass
    ctx.check_cancelled()
    ctx.cancel.cancel()
    with pytest.raises(Cancelled):
        ctx.check_cancelled()
