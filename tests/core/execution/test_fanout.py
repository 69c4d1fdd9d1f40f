"""Behaviour of gather_bounded and gather_best_effort."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from core.contracts.errors import ErrorClass, Failure
from core.execution.cancellation import Cancelled
from core.execution.fanout import SIBLING_CLEANUP_GRACE_S, gather_best_effort, gather_bounded

TINY_GRACE = 0.01


async def until(predicate: Callable[[], bool], *, steps: int = 10_000) -> None:
    """Yield to the loop until ``predicate`` holds, failing after a bounded number of steps."""
    for _ in range(steps):
        if predicate():
            return
        await asyncio.sleep(0)
    pytest.fail("condition not reached")


class Stubborn:
    """A child that swallows every cancellation in a loop until the test releases it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.swallowed = 0
        self.task: asyncio.Task[Any] | None = None

    async def run(self) -> str:
        self.task = asyncio.current_task()
        self.started.set()
        while not self.release.is_set():
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.swallowed += 1  # the misbehaviour under test: never do this
        return "stubborn finished"

    async def finish(self) -> None:
        """Let the abandoned child end, so the test leaves no task behind."""
        self.release.set()
        assert self.task is not None
        assert await asyncio.wait_for(self.task, timeout=5) == "stubborn finished"


# --- order, bound, context -----------------------------------------------------------------------


async def test_results_keep_input_order_whatever_order_the_slots_finish_in() -> None:
    gates = [asyncio.Event() for _ in range(4)]

    async def slot(index: int) -> int:
        await gates[index].wait()
        return index * 10

    running = asyncio.create_task(gather_bounded(slot(i) for i in range(4)))
    for gate in reversed(gates):
        gate.set()
        await asyncio.sleep(0)
    assert await running == [0, 10, 20, 30]


async def test_best_effort_keeps_input_order_too() -> None:
    gates = [asyncio.Event() for _ in range(3)]

    async def slot(index: int) -> int:
        await gates[index].wait()
        return index

    running = asyncio.create_task(gather_best_effort([slot(0), slot(1), slot(2)]))
    for gate in reversed(gates):
        gate.set()
        await asyncio.sleep(0)
    assert await running == [0, 1, 2]


@pytest.mark.parametrize("gather", [gather_bounded, gather_best_effort])
async def test_no_awaitables_gives_no_results(gather: Callable[..., Coroutine[Any, Any, list[Any]]]) -> None:
    assert await gather([]) == []


@pytest.mark.parametrize("make_sem", [lambda: 2, lambda: asyncio.Semaphore(2)])
async def test_sem_bounds_how_many_slots_run_at_once(make_sem: Callable[[], Any]) -> None:
    gate = asyncio.Event()
    active = 0
    most = 0

    async def slot(index: int) -> int:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await gate.wait()
        active -= 1
        return index

    running = asyncio.create_task(gather_bounded([slot(i) for i in range(5)], sem=make_sem()))
    await until(lambda: active == 2)
    for _ in range(20):
        await asyncio.sleep(0)
    assert active == 2
    gate.set()
    assert await running == [0, 1, 2, 3, 4]
    assert most == 2


async def test_a_shared_semaphore_bounds_two_fan_outs_together() -> None:
    sem = asyncio.Semaphore(1)
    gate = asyncio.Event()
    active = 0
    most = 0

    async def slot() -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await gate.wait()
        active -= 1

    both = asyncio.gather(gather_bounded([slot(), slot()], sem), gather_best_effort([slot()], sem))
    await until(lambda: active == 1)
    gate.set()
    await both
    assert most == 1


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
async def test_a_bad_sem_is_refused_and_the_coroutines_are_closed(bad: Any) -> None:
    async def slot() -> None:
        return None

    pending = [slot(), slot()]
    with pytest.raises(ValueError, match="sem must be"):
        await gather_bounded(pending, sem=bad)
    assert all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in pending)


async def test_a_negative_grace_is_refused() -> None:
    async def slot() -> None:
        return None

    with pytest.raises(ValueError, match="cleanup_grace"):
        await gather_best_effort([slot()], cleanup_grace=-1)


async def test_children_see_the_callers_context_variables() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
    request_id.set("req-42")

    async def slot() -> str:
        return request_id.get()

    assert await gather_bounded([slot(), slot()]) == ["req-42", "req-42"]


async def test_any_awaitable_is_accepted_not_only_coroutines() -> None:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.set_result("from a future")

    async def slot() -> str:
        return "from a coroutine"

    assert await gather_bounded([future, slot()]) == ["from a future", "from a coroutine"]


# --- gather_bounded: all or nothing --------------------------------------------------------------


async def test_a_failure_cancels_the_siblings_and_surfaces_as_an_exception_group() -> None:
    sibling_started = asyncio.Event()
    sibling_cancelled = False

    async def sibling() -> None:
        nonlocal sibling_cancelled
        sibling_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            sibling_cancelled = True
            raise

    async def failing() -> None:
        await sibling_started.wait()
        raise ValueError("slot 1 broke")

    with pytest.raises(ExceptionGroup) as info:
        await gather_bounded([sibling(), failing()])
    assert [type(exc) for exc in info.value.exceptions] == [ValueError]
    assert str(info.value.exceptions[0]) == "slot 1 broke"
    assert sibling_cancelled


async def test_errors_raised_during_cancellation_join_the_group_in_slot_order() -> None:
    sibling_started = asyncio.Event()

    async def sibling() -> None:
        sibling_started.set()
        try:
            await asyncio.Event().wait()
        finally:
            raise RuntimeError("cleanup broke")  # noqa: B012 - the behaviour under test

    async def failing() -> None:
        await sibling_started.wait()
        raise ValueError("slot 1 broke")

    with pytest.raises(ExceptionGroup) as info:
        await gather_bounded([sibling(), failing()])
    assert [str(exc) for exc in info.value.exceptions] == ["cleanup broke", "slot 1 broke"]


async def test_siblings_finish_their_cleanup_before_the_abort_returns() -> None:
    sibling_started = asyncio.Event()
    cleaned_up = False

    async def sibling() -> None:
        nonlocal cleaned_up
        sibling_started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits, like flushing a span
            cleaned_up = True

    async def failing() -> None:
        await sibling_started.wait()
        raise ValueError("boom")

    with pytest.raises(ExceptionGroup):
        await gather_bounded([sibling(), failing()])
    assert cleaned_up


async def test_a_slot_cancelled_by_something_else_is_reported_as_cancelled_not_as_task_cancellation() -> None:
    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    async def fine() -> str:
        return "ok"

    with pytest.raises(ExceptionGroup) as info:
        await gather_bounded([fine(), cancels_itself()])
    assert [type(exc) for exc in info.value.exceptions] == [Cancelled]
    assert "slot[1]" in str(info.value.exceptions[0])


async def test_coroutines_that_never_got_the_semaphore_are_closed_not_left_to_warn() -> None:
    async def failing() -> None:
        raise ValueError("first slot fails")

    async def never_runs() -> None:
        raise AssertionError("should not start")

    waiting = [never_runs(), never_runs()]
    with pytest.raises(ExceptionGroup):
        await gather_bounded([failing(), *waiting], sem=1)
    assert all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in waiting)


# --- the bounded abort ---------------------------------------------------------------------------


def test_the_cleanup_grace_is_five_seconds_and_is_the_default_bound() -> None:
    assert SIBLING_CLEANUP_GRACE_S == 5
    for gather in (gather_bounded, gather_best_effort):
        default = inspect.signature(gather).parameters["cleanup_grace"].default
        assert default == SIBLING_CLEANUP_GRACE_S


async def test_a_sibling_swallowing_cancellation_does_not_wedge_the_abort(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stubborn = Stubborn()

    async def failing() -> None:
        await stubborn.started.wait()
        raise ValueError("boom")

    with caplog.at_level(logging.WARNING, logger="core.execution.fanout"):
        async with asyncio.timeout(30):  # a safety net only: the abort must end long before
            with pytest.raises(ExceptionGroup) as info:
                await gather_bounded([stubborn.run(), failing()], cleanup_grace=TINY_GRACE)
    assert [type(exc) for exc in info.value.exceptions] == [ValueError]
    assert stubborn.swallowed >= 1
    assert stubborn.task is not None and not stubborn.task.done()  # abandoned, still running
    assert "fan-out slot[0] still running" in caplog.text and "abandoning" in caplog.text
    await stubborn.finish()


async def test_a_cancelled_caller_is_not_wedged_by_a_sibling_swallowing_cancellation() -> None:
    stubborn = Stubborn()
    other_started = asyncio.Event()

    async def other() -> None:
        other_started.set()
        await asyncio.Event().wait()

    fan_out = asyncio.create_task(gather_best_effort([stubborn.run(), other()], cleanup_grace=TINY_GRACE))
    await stubborn.started.wait()
    await other_started.wait()
    fan_out.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(fan_out, timeout=30)
    assert stubborn.swallowed >= 1
    await stubborn.finish()


async def test_an_outer_timeout_breaks_in_even_while_the_abort_is_waiting_out_its_grace() -> None:
    stubborn = Stubborn()

    async def failing() -> None:
        await stubborn.started.wait()
        raise ValueError("boom")

    fan_out = asyncio.create_task(gather_bounded([stubborn.run(), failing()], cleanup_grace=3600))
    await until(lambda: stubborn.swallowed >= 1)  # the abort is now inside its (huge) grace
    fan_out.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(fan_out, timeout=30)
    await stubborn.finish()


# --- gather_best_effort: one failure does not sink the batch -------------------------------------


async def test_best_effort_slots_are_results_or_failures_naming_the_slot() -> None:
    failing_done = asyncio.Event()

    async def ok(value: str) -> str:
        await failing_done.wait()  # still running when the other slot fails: it must not be cancelled
        return value

    async def times_out() -> str:
        failing_done.set()
        raise TimeoutError("slow upstream")

    async def bad_value() -> str:
        raise ValueError("bad")

    slots = await gather_best_effort([ok("a"), times_out(), ok("c"), bad_value()])
    assert slots[0] == "a" and slots[2] == "c"
    timeout_failure, value_failure = slots[1], slots[3]
    assert isinstance(timeout_failure, Failure) and isinstance(value_failure, Failure)
    assert (timeout_failure.source, timeout_failure.category) == ("slot[1]", ErrorClass.TRANSIENT)
    assert isinstance(timeout_failure.cause, TimeoutError)
    assert (value_failure.source, value_failure.category) == ("slot[3]", ErrorClass.UNKNOWN)


async def test_best_effort_reports_a_slot_cancelled_by_something_else_as_a_failure() -> None:
    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    [slot] = await gather_best_effort([cancels_itself()])
    assert isinstance(slot, Failure)
    assert isinstance(slot.cause, Cancelled)
    assert slot.category is ErrorClass.PERMANENT
