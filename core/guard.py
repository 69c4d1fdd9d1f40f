"""Run plugin code on the event loop so that it can only fail itself.

:func:`guarded` wraps an awaitable of plugin (or tool) code so that:

- ``SystemExit`` and ``KeyboardInterrupt`` raised by it become an
  :class:`~core.errors.ExitAttemptError`: inside an asyncio task they would otherwise escape the
  event loop and end the whole process;
- every step it runs on the loop is timed, so :class:`StepStats` knows for how long it held the
  loop in one go. The kernel uses that to blame a boot hook that blocked the loop (a
  ``time.sleep`` in ``async def on_boot``) rather than the hooks that merely could not run
  meanwhile.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Generator
from time import perf_counter
from typing import Any

from core.errors import ExitAttemptError

STALL_STEP = 0.05
"""A step longer than this (seconds) counts as holding the loop."""


class StepStats:
    """How long one guarded awaitable held the loop: its longest step and the sum of long steps."""

    __slots__ = ("held", "longest")

    def __init__(self) -> None:
        self.longest = 0.0
        self.held = 0.0

    def note(self, seconds: float) -> None:
        if seconds > self.longest:
            self.longest = seconds
        if seconds >= STALL_STEP:
            self.held += seconds


@types.coroutine
def _stepped(work: Awaitable[Any], stats: StepStats, where: str) -> Generator[Any, Any, Any]:
    steps = work.__await__()
    value: Any = None
    error: BaseException | None = None
    while True:
        started = perf_counter()
        try:
            yielded = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            stats.note(perf_counter() - started)
            return stop.value
        except (SystemExit, KeyboardInterrupt) as exc:
            stats.note(perf_counter() - started)
            raise ExitAttemptError(exc, where) from exc
        except BaseException:
            stats.note(perf_counter() - started)
            raise
        stats.note(perf_counter() - started)
        try:
            value, error = (yield yielded), None
        except GeneratorExit:
            close = getattr(steps, "close", None)
            if close is not None:
                close()
            raise
        except BaseException as exc:  # delivered into the plugin's code, cancellation included
            value, error = None, exc


async def guarded(work: Awaitable[Any], where: str, stats: StepStats | None = None) -> Any:
    """Await ``work``; its ``SystemExit``/``KeyboardInterrupt`` becomes its own failure."""
    return await _stepped(work, stats if stats is not None else StepStats(), where)
