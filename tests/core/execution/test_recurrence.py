"""Behaviour of attempt_until_stuck: recurrence-bounded retries of attempts that miss their goal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from core.contracts.errors import ErrorClass, Failure, KeelError, classify
from core.execution.recurrence import RecurrenceResult, StopReason, Stuck, attempt_until_stuck
from core.serialization import stable_hash


@dataclass(frozen=True)
class Outcome:
    number: int
    failure_signature: Any


def scripted(*signatures: Any) -> tuple[Callable[[], Awaitable[Outcome]], list[int]]:
    """An attempt whose n-th run fails with the n-th signature (``None`` = reached the goal)."""
    runs: list[int] = []

    async def run_one() -> Outcome:
        runs.append(len(runs) + 1)
        return Outcome(len(runs), signatures[len(runs) - 1])

    return run_one, runs


def signature_of(outcome: Outcome) -> Any:
    return outcome.failure_signature


async def test_the_documented_call_escalates_an_a_b_a_cycle_at_the_third_attempt() -> None:
    run_one, runs = scripted("A", "B", "A", "C")
    with pytest.raises(Stuck) as info:
        await attempt_until_stuck(
            lambda: run_one(),
            fingerprint=lambda outcome: outcome.failure_signature,
            on_repeat="escalate",
            max_attempts=4,
        )
    assert runs == [1, 2, 3]
    stuck = info.value
    assert (stuck.attempt, stuck.repeats, stuck.signature) == (3, 1, "A")
    assert str(stuck) == "attempt 3 repeated the failure signature of attempt 1"
    assert stuck.failure.source == "attempt[3]"
    assert stuck.failure.category is ErrorClass.PERMANENT
    assert stuck.failure.cause is None
    assert stuck.failure.partial_output == Outcome(3, "A")


def test_stuck_is_a_permanent_keel_error() -> None:
    failure = Failure(ErrorClass.PERMANENT, source="attempt[2]")
    stuck = Stuck(failure, attempt=2, repeats=1, signature="A")
    assert isinstance(stuck, KeelError)
    assert classify(stuck) is ErrorClass.PERMANENT


async def test_distinct_signatures_keep_going_until_the_backstop() -> None:
    run_one, runs = scripted("A", "B", "C", "D", "E")
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, max_attempts=3)
    assert runs == [1, 2, 3]
    assert result == RecurrenceResult(Outcome(3, "C"), 3, StopReason.EXHAUSTED, "C")
    assert not result.stuck and not result.succeeded


async def test_a_none_fingerprint_means_the_goal_was_reached() -> None:
    run_one, runs = scripted("A", "B", None)
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, max_attempts=10)
    assert runs == [1, 2, 3]
    assert result.succeeded and not result.stuck
    assert (result.outcome, result.attempts, result.failure) == (Outcome(3, None), 3, None)


@pytest.mark.parametrize(
    ("signatures", "stops_at", "repeats"),
    [
        (["A", "A"], 2, 1),
        (["A", "B", "A", "B"], 3, 1),
        (["A", "B", "C", "B"], 4, 2),
    ],
)
async def test_the_whole_history_is_compared_not_just_the_last_attempt(
    signatures: list[str], stops_at: int, repeats: int
) -> None:
    run_one, runs = scripted(*signatures, "Z", "Y")
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="stop", max_attempts=10)
    assert len(runs) == stops_at
    assert result.stuck
    assert (result.attempts, result.repeats) == (stops_at, repeats)


async def test_stop_returns_what_escalate_would_have_raised() -> None:
    run_one, _ = scripted("A", "B", "A")
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="stop")
    assert result.stop_reason is StopReason.REPEATED
    assert (result.outcome, result.signature, result.repeats) == (Outcome(3, "A"), "A", 1)
    assert result.failure is not None
    assert result.failure.source == "attempt[3]"
    assert result.failure.partial_output == Outcome(3, "A")

    run_again, _ = scripted("A", "B", "A")
    with pytest.raises(Stuck) as info:
        await attempt_until_stuck(run_again, fingerprint=signature_of, on_repeat="escalate")
    assert info.value.failure == result.failure


async def test_unhashable_signatures_are_compared_by_content() -> None:
    run_one, runs = scripted(
        {"error": "404", "path": ["a"]}, {"error": "500"}, {"path": ["a"], "error": "404"}
    )
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="stop")
    assert runs == [1, 2, 3]
    assert result.stuck and result.repeats == 1


async def test_editing_a_signature_after_the_fact_does_not_rewrite_history() -> None:
    first: dict[str, Any] = {"error": "404"}
    run_one, runs = scripted(first, {"error": "500"}, {"error": "404"})

    def fingerprint(outcome: Outcome) -> Any:
        if outcome.number == 2:
            first["error"] = "changed"  # the caller keeps using its own dict
        return outcome.failure_signature

    result = await attempt_until_stuck(run_one, fingerprint=fingerprint, on_repeat="stop")
    assert result.stuck and result.repeats == 1


class SlotSignature:
    """A signature stable_hash cannot look inside: it has neither __dict__ nor dataclass fields."""

    __slots__ = ("code",)

    def __init__(self, code: str) -> None:
        self.code = code


class EqualSlotSignature(SlotSignature):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSignature) and other.code == self.code

    def __hash__(self) -> int:
        return hash(self.code)


async def test_signatures_that_only_share_a_hash_do_not_stop_the_run() -> None:
    signatures = [SlotSignature("timeout"), SlotSignature("auth"), SlotSignature("quota")]
    assert len({stable_hash(s) for s in signatures}) == 1  # the collision this guards against
    run_one, runs = scripted(*signatures, None)
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="escalate")
    assert runs == [1, 2, 3, 4]
    assert result.succeeded


async def test_a_colliding_hash_confirmed_by_equality_does_stop_the_run() -> None:
    signatures = [EqualSlotSignature("timeout"), EqualSlotSignature("auth"), EqualSlotSignature("timeout")]
    assert len({stable_hash(s) for s in signatures}) == 1
    run_one, runs = scripted(*signatures)
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="stop")
    assert runs == [1, 2, 3]
    assert result.stuck and result.repeats == 1


async def test_the_same_signature_object_twice_is_a_repeat() -> None:
    same = SlotSignature("timeout")
    run_one, _ = scripted(same, same)
    result = await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="stop")
    assert result.stuck and result.attempts == 2


async def test_an_exception_from_an_attempt_propagates_at_once() -> None:
    calls = 0

    async def broken() -> Outcome:
        nonlocal calls
        calls += 1
        raise TimeoutError("not this loop's business")

    with pytest.raises(TimeoutError):
        await attempt_until_stuck(broken, fingerprint=signature_of)
    assert calls == 1


async def test_bad_settings_are_refused() -> None:
    run_one, runs = scripted("A")
    with pytest.raises(ValueError):
        await attempt_until_stuck(run_one, fingerprint=signature_of, on_repeat="retry")
    with pytest.raises(ValueError, match="max_attempts"):
        await attempt_until_stuck(run_one, fingerprint=signature_of, max_attempts=0)
    assert runs == []
