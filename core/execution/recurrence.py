"""Retry a step that completes but misses its goal, until it starts going in circles.

:func:`attempt_until_stuck` runs ``attempt`` again and again. Each outcome is reduced by ``fingerprint``
to a signature of how it fell short; ``None`` means it did not fall short, and the run ends there. The
run is bounded by recurrence, not by a count: it stops as soon as a signature comes back that *any*
earlier attempt produced — so an A, B, A, B oscillation is caught at the third attempt, while A, B, C
keeps going. ``max_attempts`` is only a backstop for signatures that keep genuinely differing.

Signatures may be unhashable (a dict, a list), so they are bucketed by ``stable_hash``. That hash is
lossy by design (values it cannot look inside may collide, which for a cache key only costs a miss), and
here a collision would be a false "stuck" verdict; so a shared hash only nominates an earlier attempt,
and the repeat is confirmed by ``==`` (or identity).

What the run hands back, chosen where the specification leaves room:

* ``on_repeat="escalate"`` raises :class:`Stuck` on a repeat; ``on_repeat="stop"`` returns a
  :class:`RecurrenceResult` with ``stuck`` true instead. Either way the same :class:`Failure` describes
  the repeating attempt: ``permanent``, ``source`` ``"attempt[n]"``, no cause (the attempt raised
  nothing), and the attempt's outcome as ``partial_output``.
* A success, and a run that reaches ``max_attempts`` without repeating, return a
  :class:`RecurrenceResult` in both modes (``stop_reason`` tells them apart): running out of the
  backstop is not being stuck.
* An exception raised by ``attempt`` or ``fingerprint`` propagates at once: failing to complete is
  :func:`~core.execution.resilience.run_with_resilience`'s business, not this loop's. So does the
  ``ValueError`` ``stable_hash`` raises for a signature that contains itself.
* The history keeps a ``deep_freeze`` copy of each signature, so a dict or list that ``fingerprint``
  returned and someone later edits cannot rewrite what later attempts are compared against.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from core.contracts.errors import ErrorClass, Failure, KeelError
from core.serialization import deep_freeze, stable_hash

__all__ = ["RecurrenceResult", "RepeatAction", "StopReason", "Stuck", "attempt_until_stuck"]

T = TypeVar("T")


class RepeatAction(enum.StrEnum):
    """What :func:`attempt_until_stuck` does when a signature repeats."""

    ESCALATE = "escalate"
    STOP = "stop"


class StopReason(enum.StrEnum):
    """Why :func:`attempt_until_stuck` stopped."""

    SUCCEEDED = "succeeded"
    """The last attempt's fingerprint was ``None``."""
    REPEATED = "repeated"
    """The last attempt repeated an earlier attempt's signature."""
    EXHAUSTED = "exhausted"
    """``max_attempts`` attempts ran, every signature distinct."""


class Stuck(KeelError):
    """An attempt repeated the failure signature of an earlier one; retrying is going in circles."""

    error_class: ErrorClass = ErrorClass.PERMANENT

    def __init__(self, failure: Failure, *, attempt: int, repeats: int, signature: object) -> None:
        super().__init__(f"attempt {attempt} repeated the failure signature of attempt {repeats}")
        self.failure = failure
        self.attempt = attempt
        self.repeats = repeats
        self.signature = signature


@dataclass(frozen=True)
class RecurrenceResult(Generic[T]):
    """How a run of attempts ended: the last outcome, how many attempts ran, and why it stopped.

    When ``stuck``, ``repeats`` is the earlier attempt whose signature came back and ``failure`` describes
    the repeating attempt (the one :class:`Stuck` would carry); otherwise both are ``None``.
    ``signature`` is the last attempt's signature (``None`` after a success).
    """

    outcome: T
    attempts: int
    stop_reason: StopReason
    signature: object = None
    repeats: int | None = None
    failure: Failure | None = None

    @property
    def stuck(self) -> bool:
        """Whether the run stopped because a signature repeated."""
        return self.stop_reason is StopReason.REPEATED

    @property
    def succeeded(self) -> bool:
        """Whether the last attempt reached its goal."""
        return self.stop_reason is StopReason.SUCCEEDED


def _earlier_match(history: dict[str, list[tuple[int, object]]], key: str, signature: object) -> int | None:
    for attempt, earlier in history.get(key, ()):
        if earlier is signature or earlier == signature:
            return attempt
    return None


async def attempt_until_stuck(
    attempt: Callable[[], Awaitable[T]],
    *,
    fingerprint: Callable[[T], object],
    on_repeat: RepeatAction | str = RepeatAction.ESCALATE,
    max_attempts: int = 10,
) -> RecurrenceResult[T]:
    """Run ``attempt`` until its fingerprint is ``None``, repeats an earlier one, or ``max_attempts`` runs."""
    action = RepeatAction(on_repeat)
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, not {max_attempts!r}")
    history: dict[str, list[tuple[int, object]]] = {}
    outcome: T
    signature: object = None
    for number in range(1, max_attempts + 1):
        outcome = await attempt()
        signature = fingerprint(outcome)
        if signature is None:
            return RecurrenceResult(outcome, number, StopReason.SUCCEEDED)
        key = stable_hash(signature)
        repeats = _earlier_match(history, key, signature)
        if repeats is not None:
            failure = Failure(ErrorClass.PERMANENT, source=f"attempt[{number}]", partial_output=outcome)
            if action is RepeatAction.ESCALATE:
                raise Stuck(failure, attempt=number, repeats=repeats, signature=signature)
            return RecurrenceResult(outcome, number, StopReason.REPEATED, signature, repeats, failure)
        history.setdefault(key, []).append((number, deep_freeze(signature)))
    return RecurrenceResult(outcome, max_attempts, StopReason.EXHAUSTED, signature)
