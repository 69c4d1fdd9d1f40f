"""A virtual clock, so retry and backoff loops cost no wall-clock time in a test.

``FakeClock`` satisfies ``ClockPort``. ``sleep`` records the requested duration and moves virtual time
forward instead of blocking; ``advance`` moves time without recording a sleep, which is how a test
simulates the outside world's time passing between two steps.
"""

from __future__ import annotations

import asyncio


class FakeClock:
    """Virtual time: ``now()`` starts at ``start`` and only moves when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += seconds
        # Still a suspension point, as a real sleep is: a cancellation aimed at the sleeper lands here.
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self._now += seconds
