"""A circuit breaker: stop calling a dependency that keeps failing, and probe it before trusting it again.

Three states. **Closed**: calls go through; ``failure_threshold`` consecutive failures open the
circuit (a success resets the count). **Open**: calls are refused with :class:`CircuitOpen` until
``reset_timeout`` seconds have passed on the injected clock. **Half-open**: up to
``half_open_max_calls`` trial calls go through at a time; a trial's success closes the circuit, its
failure opens it again for another ``reset_timeout``.

The protocol for a caller: :meth:`~CircuitBreaker.allow` (or :meth:`~CircuitBreaker.check`, which raises)
before the call, then exactly one of :meth:`~CircuitBreaker.record_success`,
:meth:`~CircuitBreaker.record_failure` or, when the call ended with no verdict on the dependency (it was
cancelled), :meth:`~CircuitBreaker.release`. What counts as a failure is the caller's choice;
``run_with_resilience`` counts transient errors only, since a 401 or a bad argument says nothing about the
dependency's health. Reports that arrive while the circuit is open (calls admitted before it opened) are
ignored, so they cannot extend or cut short the open period.

The clock is injectable (``time.monotonic`` by default) so transitions are tested without waiting. A
breaker belongs to one event loop and is not thread-safe.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

from core.contracts.errors import ErrorClass, KeelError

__all__ = ["BreakerState", "CircuitBreaker", "CircuitOpen"]


class BreakerState(enum.StrEnum):
    """Where a :class:`CircuitBreaker` stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitOpen(KeelError):
    """A call was refused because its circuit is open; ``retry_in`` says how long until a probe."""

    error_class: ErrorClass = ErrorClass.TRANSIENT

    def __init__(self, name: str, retry_in: float) -> None:
        super().__init__(f"circuit {name!r} is open; next probe in {retry_in:.3g}s")
        self.name = name
        self.retry_in = retry_in


class CircuitBreaker:
    """Closed / open / half-open state for one dependency."""

    def __init__(
        self,
        *,
        name: str = "default",
        failure_threshold: int = 5,
        reset_timeout: float = 30.0,
        half_open_max_calls: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, not {failure_threshold!r}")
        if reset_timeout < 0:
            raise ValueError(f"reset_timeout must be >= 0, not {reset_timeout!r}")
        if half_open_max_calls < 1:
            raise ValueError(f"half_open_max_calls must be >= 1, not {half_open_max_calls!r}")
        self.name = name
        self.failure_threshold = failure_threshold
        self.reset_timeout = reset_timeout
        self.half_open_max_calls = half_open_max_calls
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._trials = 0

    @property
    def state(self) -> BreakerState:
        """The current state; an open circuit whose timeout has passed reads as half-open."""
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.reset_timeout:
            self._state = BreakerState.HALF_OPEN
            self._trials = 0
        return self._state

    @property
    def consecutive_failures(self) -> int:
        """Failures counted towards the threshold since the last success (closed state only)."""
        return self._failures

    def allow(self) -> bool:
        """Whether a call may go ahead now; in half-open state a ``True`` takes one trial slot."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and self._trials < self.half_open_max_calls:
            self._trials += 1
            return True
        return False

    def check(self) -> None:
        """Like :meth:`allow`, but raise :class:`CircuitOpen` instead of returning ``False``."""
        if not self.allow():
            raise CircuitOpen(self.name, self.retry_in())

    def retry_in(self) -> float:
        """Seconds until an open circuit admits a probe; ``0`` when it is not open."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._opened_at + self.reset_timeout - self._clock())

    def record_success(self) -> None:
        """A call went through and the dependency answered."""
        state = self.state
        if state is BreakerState.CLOSED:
            self._failures = 0
        elif state is BreakerState.HALF_OPEN:
            self._close()

    def record_failure(self) -> None:
        """A call failed in a way that says the dependency is unhealthy."""
        state = self.state
        if state is BreakerState.CLOSED:
            self._failures += 1
            if self._failures >= self.failure_threshold:
                self._open()
        elif state is BreakerState.HALF_OPEN:
            self._open()

    def release(self) -> None:
        """A call admitted by :meth:`allow` ended with no verdict: free its trial slot, nothing else."""
        if self.state is BreakerState.HALF_OPEN and self._trials > 0:
            self._trials -= 1

    def _open(self) -> None:
        self._state = BreakerState.OPEN
        self._opened_at = self._clock()
        self._failures = 0
        self._trials = 0

    def _close(self) -> None:
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._trials = 0

    def __repr__(self) -> str:
        return f"<CircuitBreaker {self.name!r} {self.state}>"
