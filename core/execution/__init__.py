"""Execution primitives: cancellation, bounded fan-out, the sync bridge, retry and recurrence.

Policy-free building blocks the runtime and agents compose: a :class:`CancellationToken` to stop a run
tree cooperatively, :func:`gather_bounded` / :func:`gather_best_effort` for structured fan-out,
:func:`run_sync` to call a coroutine from sync code, :class:`Backoff`, :class:`CircuitBreaker` and
:func:`run_with_resilience` for flaky calls, and :func:`attempt_until_stuck` for attempts that
complete without reaching their goal.
"""

from core.execution.backoff import Backoff
from core.execution.breaker import BreakerState, CircuitBreaker, CircuitOpen
from core.execution.cancellation import CancellationToken, Cancelled
from core.execution.fanout import SIBLING_CLEANUP_GRACE_S, gather_best_effort, gather_bounded
from core.execution.keyed_lock import KeyedLock
from core.execution.recurrence import RecurrenceResult, RepeatAction, StopReason, Stuck, attempt_until_stuck
from core.execution.resilience import run_with_resilience
from core.execution.sync_bridge import run_sync

__all__ = [
    "SIBLING_CLEANUP_GRACE_S",
    "Backoff",
    "BreakerState",
    "Cancelled",
    "CancellationToken",
    "CircuitBreaker",
    "CircuitOpen",
    "KeyedLock",
    "RecurrenceResult",
    "RepeatAction",
    "StopReason",
    "Stuck",
    "attempt_until_stuck",
    "gather_best_effort",
    "gather_bounded",
    "run_sync",
    "run_with_resilience",
]
