"""Behaviour of Backoff: exponential ceilings, a cap, and jitter from an injectable source."""

from __future__ import annotations

import pytest

from core.execution.backoff import Backoff


def test_ceilings_grow_exponentially_up_to_the_cap() -> None:
    backoff = Backoff(base=0.5, factor=2, max_delay=5)
    assert [backoff.ceiling(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5, 5]


def test_a_huge_attempt_number_stays_at_the_cap() -> None:
    assert Backoff(base=1, factor=10, max_delay=60).ceiling(100_000) == 60


def test_without_jitter_the_delay_is_the_ceiling() -> None:
    backoff = Backoff(base=1, factor=3, max_delay=100, jitter=0)
    assert [backoff.delay(n) for n in (1, 2, 3)] == [1, 3, 9]


@pytest.mark.parametrize(
    ("jitter", "draw", "expected"),
    [
        (1.0, 0.0, 8.0),  # full jitter, lowest draw: the ceiling
        (1.0, 0.75, 2.0),  # full jitter reaches down towards zero
        (0.5, 0.0, 8.0),
        (0.5, 0.5, 6.0),
        (0.5, 0.999, 4.004),  # the default keeps a floor of half the ceiling
    ],
)
def test_jitter_draws_between_the_floor_and_the_ceiling(jitter: float, draw: float, expected: float) -> None:
    backoff = Backoff(base=1, factor=2, max_delay=100, jitter=jitter, random=lambda: draw)
    assert backoff.delay(4) == pytest.approx(expected)


def test_the_default_random_source_stays_within_bounds() -> None:
    backoff = Backoff(base=1, factor=2, max_delay=100)
    delays = [backoff.delay(3) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.parametrize(
    "kwargs",
    [{"base": -1}, {"factor": 0.5}, {"base": 2, "max_delay": 1}, {"jitter": -0.1}, {"jitter": 1.5}],
)
def test_nonsense_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_attempts_are_one_based() -> None:
    with pytest.raises(ValueError, match="1-based"):
        Backoff().delay(0)
