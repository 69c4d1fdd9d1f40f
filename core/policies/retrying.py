"""``retry()``: re-invoke a call that failed before it produced anything.

Only a *pre-stream* failure is retried: one raised before the first item (the first ``Delta`` of a
chat, the result of a tool). Once an item has been yielded the consumer has it, tokens cannot be
un-sent, and a failure after that point propagates unchanged. Whether a pre-stream failure is worth
another attempt is ``classify``'s verdict: only ``transient`` ones are retried, ``permanent`` and
``unknown`` ones propagate at once, as does the last failure when the attempts run out.

Waits between attempts follow ``backoff`` and go through, in order of preference: the ``sleep``
given here (``FakeClock.sleep`` in a test), the run's clock (``ctx.clock.sleep``), or
``asyncio.sleep``. ``call.meta["attempts"]`` records how many attempts the call took.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from core.contracts.errors import ErrorClass
from core.contracts.errors import classify as default_classify
from core.contracts.middleware import Call, Handler, Middleware
from core.execution.backoff import Backoff

__all__ = ["retry"]

Sleep = Callable[[float], Awaitable[None]]


def _sleeper(call: Call, sleep: Sleep | None) -> Sleep:
    if sleep is not None:
        return sleep
    clock = getattr(call.ctx, "clock", None)
    return clock.sleep if clock is not None else asyncio.sleep


def retry(
    max_attempts: int = 3,
    *,
    sleep: Sleep | None = None,
    classify: Callable[[BaseException], ErrorClass] = default_classify,
    backoff: Backoff | None = None,
) -> Middleware:
    """Retry transient pre-stream failures up to ``max_attempts`` attempts in all."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
    schedule = backoff if backoff is not None else Backoff()

    async def retry_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        attempt = 1
        while True:
            started = False
            try:
                async for item in nxt(call):
                    started = True
                    yield item
                call.meta["attempts"] = attempt
                return
            except Exception as exc:
                if started or attempt >= max_attempts or classify(exc) is not ErrorClass.TRANSIENT:
                    call.meta["attempts"] = attempt
                    raise
            await _sleeper(call, sleep)(schedule.delay(attempt))
            attempt += 1

    return retry_middleware
