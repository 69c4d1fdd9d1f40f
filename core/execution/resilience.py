"""Retry a call that failed to complete: classify the error, back off, respect a circuit breaker.

:func:`run_with_resilience` is for flakiness — a timeout, a 502, a dropped connection. An attempt that
completed with the wrong answer is a different problem; see :mod:`core.execution.recurrence`.

The rules it keeps:

* Only errors the classifier calls ``transient`` are retried. ``permanent`` and ``unknown`` errors are
  raised at once, unchanged.
* When the attempts run out, the last error is raised unchanged, so callers catch the types they know.
* Task cancellation (``asyncio.CancelledError``) is never classified, retried or swallowed.
* With a breaker: each attempt must be admitted (otherwise :class:`~core.execution.breaker.CircuitOpen`
  is raised, chained to the last error if there was one); transient errors are reported to it as
  failures; a success, or a non-transient error (the dependency answered; the call was wrong), as a
  success; a cancelled attempt only frees its slot.
* Sleeping goes through ``sleep`` (``asyncio.sleep`` unless injected), so a test controls time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.contracts.errors import ErrorClass
from core.contracts.errors import classify as default_classify
from core.execution.backoff import Backoff
from core.execution.breaker import CircuitBreaker, CircuitOpen

__all__ = ["run_with_resilience"]

T = TypeVar("T")

_DEFAULT_BACKOFF = Backoff()


async def run_with_resilience(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int = 3,
    classify: Callable[[BaseException], ErrorClass] = default_classify,
    backoff: Backoff = _DEFAULT_BACKOFF,
    breaker: CircuitBreaker | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Call ``fn`` up to ``attempts`` times, retrying transient failures with ``backoff`` between them."""
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, not {attempts!r}")
    last_error: Exception | None = None
    for attempt in range(1, attempts + 1):
        if breaker is not None and not breaker.allow():
            raise CircuitOpen(breaker.name, breaker.retry_in()) from last_error
        try:
            result = await fn()
        except Exception as exc:
            verdict = classify(exc)
            if breaker is not None:
                if verdict is ErrorClass.TRANSIENT:
                    breaker.record_failure()
                else:
                    breaker.record_success()
            if verdict is not ErrorClass.TRANSIENT or attempt == attempts:
                raise
            last_error = exc
        except BaseException:
            if breaker is not None:
                breaker.release()
            raise
        else:
            if breaker is not None:
                breaker.record_success()
            return result
        await sleep(backoff.delay(attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover
