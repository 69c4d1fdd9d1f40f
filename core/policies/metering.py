"""``meter()``: guard every meter before a call and charge every meter from the call's usage.

The meters are ``ctx.all_meters``: the run's ``Budget`` and any extra meter (a tenant ``Quota``).
Before the call each one's ``guard(scope)`` may refuse it with ``MeterExceeded``, so an exhausted
budget costs nothing more. After a chat call completes, each meter is charged with the usage the
stream reported (an empty ``Usage`` when it reported none, so the call still counts). Every meter is
charged even when an earlier one is crossed; the first ``MeterExceeded`` is then raised. The deltas
have already reached the consumer by then: the answer that crossed a ceiling is not lost.

A chat stream that fails is not charged (its usage is unknown). A tool call is guarded but not
charged: tools report no usage.

Without this policy in the chain nothing charges the budget: ``Budget`` only keeps the ledger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import Delta, Usage
from core.runtime.meters import MeterExceeded

__all__ = ["meter"]

_EMPTY = Usage()


def meter() -> Middleware:
    """Guard, then charge, every meter in ``ctx.all_meters``."""

    async def meter_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        ctx = call.ctx
        meters = ctx.all_meters
        scope = ctx.scope
        for each in meters:
            each.guard(scope)
        if call.kind != "chat":
            async for item in nxt(call):
                yield item
            return
        usage: Usage | None = None
        delta: Delta
        async for delta in nxt(call):
            if delta.usage is not None:
                usage = delta.usage
            yield delta
        crossed: MeterExceeded | None = None
        for each in meters:
            try:
                each.charge(usage if usage is not None else _EMPTY, scope)
            except MeterExceeded as exc:
                crossed = crossed or exc
        if crossed is not None:
            raise crossed

    return meter_middleware
