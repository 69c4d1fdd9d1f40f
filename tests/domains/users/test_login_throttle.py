"""The sliding-window login throttle, on a clock the test moves."""

from __future__ import annotations

import pytest

from domains.users.plugins.login import LoginBackoff, LoginThrottle, TooManyLoginAttempts


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_allows_until_the_limit_then_says_how_long_to_wait(clock: Clock) -> None:
    throttle = LoginThrottle(3, 60.0, clock=clock)
    for step in range(3):
        assert throttle.retry_after("ada") is None
        throttle.record_failure("ada")
        clock.now += 10 * (step + 1)
    # failures at 1000, 1010, 1030; now 1060: the first leaves the window at 1060 exactly
    assert throttle.retry_after("ada") is None
    throttle.record_failure("ada")
    assert throttle.retry_after("ada") == pytest.approx(10.0)  # 1010 + 60 - 1060


def test_the_window_slides(clock: Clock) -> None:
    throttle = LoginThrottle(2, 100.0, clock=clock)
    throttle.record_failure("k")
    throttle.record_failure("k")
    assert throttle.retry_after("k") == pytest.approx(100.0)
    clock.now += 99.0
    assert throttle.retry_after("k") == pytest.approx(1.0)
    clock.now += 1.0
    assert throttle.retry_after("k") is None


def test_keys_are_independent_and_reset_and_forgive_work(clock: Clock) -> None:
    throttle = LoginThrottle(1, 60.0, clock=clock)
    throttle.record_failure("a")
    assert throttle.retry_after("a") is not None
    assert throttle.retry_after("b") is None
    throttle.forgive_one("a")
    assert throttle.retry_after("a") is None
    throttle.record_failure("a")
    throttle.reset("a")
    assert throttle.retry_after("a") is None
    throttle.forgive_one("never-seen")


def test_tracked_keys_are_bounded_oldest_first(clock: Clock) -> None:
    throttle = LoginThrottle(1, 60.0, clock=clock, max_keys=2)
    for key in ("a", "b", "c"):
        throttle.record_failure(key)
    assert throttle.retry_after("a") is None
    assert throttle.retry_after("b") is not None and throttle.retry_after("c") is not None


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="limit >= 1"):
        LoginThrottle(0, 60.0)
    with pytest.raises(ValueError, match="window > 0"):
        LoginThrottle(5, 0)


def test_the_429_carries_a_whole_number_retry_after() -> None:
    error = TooManyLoginAttempts(12.2)
    assert error.status_code == 429
    assert error.headers == {"Retry-After": "13"}
    assert str(error) == "too many failed logins; try again in 13 seconds"
    assert TooManyLoginAttempts(0.0).headers == {"Retry-After": "1"}


def test_backoff_gives_free_failures_then_doubling_waits_up_to_a_cap(clock: Clock) -> None:
    backoff = LoginBackoff(3, 10.0, 35.0, 100.0, clock=clock)
    for _ in range(3):
        assert backoff.retry_after("k") is None
        backoff.record_failure("k")
    assert backoff.retry_after("k") == pytest.approx(10.0)
    assert backoff.retry_after("other") is None
    clock.now += 10.0
    assert backoff.retry_after("k") is None
    backoff.record_failure("k")
    assert backoff.retry_after("k") == pytest.approx(20.0)
    clock.now += 20.0
    backoff.record_failure("k")
    assert backoff.retry_after("k") == pytest.approx(35.0)  # 40, capped
    clock.now += 35.0 + 100.0 + 1.0  # the wait and then the forgetting period are over
    assert backoff.retry_after("k") is None
    backoff.record_failure("k")
    assert backoff.retry_after("k") is None, "started afresh: one failure of three free ones"


def test_backoff_forgive_and_reset(clock: Clock) -> None:
    backoff = LoginBackoff(1, 10.0, 10.0, 100.0, clock=clock)
    backoff.record_failure("k")
    assert backoff.retry_after("k") is not None
    backoff.forgive_one("k")
    assert backoff.retry_after("k") is None
    backoff.record_failure("k")
    backoff.reset("k")
    assert backoff.retry_after("k") is None
    backoff.forgive_one("never-seen")
    with pytest.raises(ValueError, match="free >= 1"):
        LoginBackoff(0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="base <= cap"):
        LoginBackoff(1, 10.0, 1.0, 1.0)
