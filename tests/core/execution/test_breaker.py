"""Behaviour of CircuitBreaker: closed, open and half-open, driven by a fake clock."""

from __future__ import annotations

import pytest

from core.contracts.errors import ErrorClass, KeelError, classify
from core.execution.breaker import BreakerState, CircuitBreaker, CircuitOpen


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(name="llm", failure_threshold=3, reset_timeout=10, clock=clock)


def state(breaker: CircuitBreaker) -> BreakerState:
    """Read the state through a call, so mypy does not narrow a property across transitions."""
    return breaker.state


def open_it(breaker: CircuitBreaker) -> None:
    for _ in range(breaker.failure_threshold):
        assert breaker.allow()
        breaker.record_failure()


def test_a_new_breaker_is_closed_and_lets_calls_through(breaker: CircuitBreaker) -> None:
    assert state(breaker) is BreakerState.CLOSED
    assert breaker.allow()
    breaker.check()


def test_consecutive_failures_up_to_the_threshold_open_it(breaker: CircuitBreaker) -> None:
    breaker.record_failure()
    breaker.record_failure()
    assert state(breaker) is BreakerState.CLOSED
    assert breaker.consecutive_failures == 2
    breaker.record_failure()
    assert state(breaker) is BreakerState.OPEN
    assert not breaker.allow()


def test_a_success_resets_the_failure_count(breaker: CircuitBreaker) -> None:
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()
    assert breaker.consecutive_failures == 0
    breaker.record_failure()
    breaker.record_failure()
    assert state(breaker) is BreakerState.CLOSED


def test_an_open_breaker_refuses_until_the_reset_timeout_passes(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    open_it(breaker)
    clock.now += 4
    with pytest.raises(CircuitOpen) as info:
        breaker.check()
    assert info.value.retry_in == pytest.approx(6)
    assert info.value.name == "llm"
    clock.now += 6
    assert state(breaker) is BreakerState.HALF_OPEN
    assert breaker.retry_in() == 0


def test_circuit_open_is_a_transient_keel_error() -> None:
    exc = CircuitOpen("llm", 2.5)
    assert isinstance(exc, KeelError)
    assert classify(exc) is ErrorClass.TRANSIENT
    assert str(exc) == "circuit 'llm' is open; next probe in 2.5s"


def test_half_open_admits_one_trial_at_a_time(breaker: CircuitBreaker, clock: FakeClock) -> None:
    open_it(breaker)
    clock.now += 10
    assert breaker.allow()
    assert not breaker.allow()
    with pytest.raises(CircuitOpen):
        breaker.check()


def test_a_successful_trial_closes_it(breaker: CircuitBreaker, clock: FakeClock) -> None:
    open_it(breaker)
    clock.now += 10
    assert breaker.allow()
    breaker.record_success()
    assert state(breaker) is BreakerState.CLOSED
    assert breaker.consecutive_failures == 0
    assert breaker.allow() and breaker.allow()


def test_a_failed_trial_reopens_it_for_a_fresh_timeout(breaker: CircuitBreaker, clock: FakeClock) -> None:
    open_it(breaker)
    clock.now += 10
    assert breaker.allow()
    breaker.record_failure()
    assert state(breaker) is BreakerState.OPEN
    clock.now += 9.9
    assert state(breaker) is BreakerState.OPEN
    clock.now += 0.1
    assert state(breaker) is BreakerState.HALF_OPEN


def test_release_frees_a_trial_slot_without_a_verdict(breaker: CircuitBreaker, clock: FakeClock) -> None:
    open_it(breaker)
    clock.now += 10
    assert breaker.allow()
    breaker.release()
    assert state(breaker) is BreakerState.HALF_OPEN
    assert breaker.allow()


def test_half_open_max_calls_sets_the_number_of_concurrent_trials(clock: FakeClock) -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=1, half_open_max_calls=2, clock=clock)
    breaker.record_failure()
    clock.now += 1
    assert [breaker.allow() for _ in range(3)] == [True, True, False]


def test_reports_from_calls_admitted_before_it_opened_do_not_move_the_open_period(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    open_it(breaker)
    clock.now += 5
    breaker.record_failure()
    breaker.record_success()
    assert state(breaker) is BreakerState.OPEN
    clock.now += 5
    assert state(breaker) is BreakerState.HALF_OPEN


@pytest.mark.parametrize(
    "kwargs", [{"failure_threshold": 0}, {"reset_timeout": -1}, {"half_open_max_calls": 0}]
)
def test_nonsense_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(**kwargs)  # type: ignore[arg-type]
