"""Behaviour of run_with_resilience: retry transient failures only, with backoff and a breaker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from core.contracts.errors import ErrorClass
from core.execution.backoff import Backoff
from core.execution.breaker import BreakerState, CircuitBreaker, CircuitOpen
from core.execution.resilience import run_with_resilience

EXACT = Backoff(base=1, factor=2, max_delay=60, jitter=0)


class HTTPError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class Script:
    """A call that fails with the scripted errors in turn, then returns ``"done"``."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def run(fn: Callable[[], Awaitable[str]], sleeps: Sleeps, **kwargs: object) -> str:
    return await run_with_resilience(fn, backoff=EXACT, sleep=sleeps, **kwargs)  # type: ignore[arg-type]


async def test_transient_failures_are_retried_with_backoff_until_success() -> None:
    call, sleeps = Script(TimeoutError(), HTTPError(503)), Sleeps()
    assert await run(call, sleeps, attempts=3) == "done"
    assert call.calls == 3
    assert sleeps.delays == [1, 2]


async def test_the_first_success_is_returned_without_sleeping() -> None:
    call, sleeps = Script(), Sleeps()
    assert await run(call, sleeps, attempts=5) == "done"
    assert (call.calls, sleeps.delays) == (1, [])


@pytest.mark.parametrize("error", [HTTPError(401), ValueError("unknown is never retried")])
async def test_permanent_and_unknown_failures_are_raised_at_once(error: Exception) -> None:
    call, sleeps = Script(error), Sleeps()
    with pytest.raises(type(error)) as info:
        await run(call, sleeps, attempts=5)
    assert info.value is error
    assert (call.calls, sleeps.delays) == (1, [])


async def test_when_attempts_run_out_the_last_error_is_raised_unchanged() -> None:
    last = ConnectionError("third")
    call, sleeps = Script(TimeoutError("first"), TimeoutError("second"), last), Sleeps()
    with pytest.raises(ConnectionError) as info:
        await run(call, sleeps, attempts=3)
    assert info.value is last
    assert sleeps.delays == [1, 2]


async def test_a_custom_classifier_decides_what_is_retried() -> None:
    call, sleeps = Script(ValueError("flaky parser")), Sleeps()
    assert await run(call, sleeps, attempts=2, classify=lambda exc: ErrorClass.TRANSIENT) == "done"


async def test_task_cancellation_is_never_retried_or_swallowed() -> None:
    call, sleeps = Script(asyncio.CancelledError()), Sleeps()
    with pytest.raises(asyncio.CancelledError):
        await run(call, sleeps, attempts=5)
    assert call.calls == 1


async def test_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="attempts"):
        await run(Script(), Sleeps(), attempts=0)


async def test_the_breaker_counts_transient_failures_and_refuses_once_open() -> None:
    breaker = CircuitBreaker(failure_threshold=2, reset_timeout=30, clock=FakeClock())
    second = TimeoutError("second")
    call, sleeps = Script(TimeoutError("first"), second), Sleeps()
    with pytest.raises(CircuitOpen) as info:
        await run(call, sleeps, attempts=5, breaker=breaker)
    assert info.value.__cause__ is second
    assert call.calls == 2
    assert breaker.state is BreakerState.OPEN


async def test_an_open_breaker_refuses_before_the_first_call() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=30, clock=FakeClock())
    breaker.record_failure()
    call = Script()
    with pytest.raises(CircuitOpen) as info:
        await run(call, Sleeps(), attempts=3, breaker=breaker)
    assert info.value.__cause__ is None
    assert call.calls == 0


async def test_a_non_transient_error_tells_the_breaker_the_dependency_answered() -> None:
    breaker = CircuitBreaker(failure_threshold=2, reset_timeout=30, clock=FakeClock())
    breaker.record_failure()
    with pytest.raises(ValueError):
        await run(Script(ValueError()), Sleeps(), attempts=3, breaker=breaker)
    assert breaker.consecutive_failures == 0
    assert breaker.state is BreakerState.CLOSED


async def test_a_half_open_trial_that_succeeds_closes_the_breaker() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=30, clock=clock)
    breaker.record_failure()
    clock.now = 30
    assert await run(Script(), Sleeps(), attempts=1, breaker=breaker) == "done"
    assert breaker.state is BreakerState.CLOSED


async def test_a_cancelled_trial_frees_its_slot_without_a_verdict() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=30, clock=clock)
    breaker.record_failure()
    clock.now = 30
    with pytest.raises(asyncio.CancelledError):
        await run(Script(asyncio.CancelledError()), Sleeps(), attempts=3, breaker=breaker)
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()


async def test_by_default_it_really_sleeps_between_attempts() -> None:
    """Without an injected ``sleep`` the wait is asyncio's: even a zero delay gives the loop a turn."""
    call = Script(TimeoutError())
    calls_when_the_loop_ran: list[int] = []
    asyncio.get_running_loop().call_soon(lambda: calls_when_the_loop_ran.append(call.calls))
    result = await run_with_resilience(call, attempts=2, backoff=Backoff(base=0, max_delay=0))
    assert result == "done"
    assert calls_when_the_loop_ran == [1]  # between the first attempt and the second
