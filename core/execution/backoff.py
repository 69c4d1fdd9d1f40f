"""Exponential backoff with jitter: how long to wait before the next retry.

The ceiling for retry ``n`` (1-based) is ``base * factor ** (n - 1)``, capped at ``max_delay``.
Jitter then spreads callers apart so a recovering service is not hit by a synchronised wave: the delay
is drawn uniformly between ``ceiling * (1 - jitter)`` and ``ceiling``. ``jitter=1`` is "full jitter"
(anywhere from zero to the ceiling), ``jitter=0`` is deterministic. The default, ``0.5``, keeps a
floor of half the ceiling, so an outage always gets at least that long to clear. The random source is
injectable so tests are exact.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """A retry delay schedule; :meth:`delay` gives the wait before retry ``n``."""

    base: float = 0.1
    factor: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.5
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    """Returns a float in ``[0, 1)``; ``random.random`` unless a test injects its own."""

    def __post_init__(self) -> None:
        if self.base < 0:
            raise ValueError(f"base must be >= 0, not {self.base!r}")
        if self.factor < 1:
            raise ValueError(f"factor must be >= 1, not {self.factor!r}")
        if self.max_delay < self.base:
            raise ValueError(f"max_delay must be >= base, not {self.max_delay!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be within [0, 1], not {self.jitter!r}")

    def ceiling(self, attempt: int) -> float:
        """The longest wait before retry ``attempt`` (1-based), before jitter."""
        if attempt < 1:
            raise ValueError(f"attempt is 1-based, not {attempt!r}")
        # Step up to the cap instead of computing factor ** n, which overflows a float for large n.
        ceiling = self.base
        for _ in range(attempt - 1):
            ceiling *= self.factor
            if ceiling >= self.max_delay:
                return self.max_delay
        return min(ceiling, self.max_delay)

    def delay(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (1-based), jittered."""
        ceiling = self.ceiling(attempt)
        return ceiling * (1 - self.jitter * self.random())
