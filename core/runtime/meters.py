"""Meters: a ceiling on spending, checked before a call and charged after it.

One idea at two scopes. ``Budget`` governs one run (money and call count); ``Quota`` governs a tenant,
keyed by ``Scope``, across every run that tenant makes. Both satisfy ``Meter`` and are driven by the
``meter()`` policy, which guards every meter in ``ctx.all_meters`` before a chat call and charges them
from the result's usage after it. Nothing is charged unless that policy is in the chain.

Money is ``Decimal``. A charge is accumulated exactly (the float ``Usage.cost_usd`` goes through
``str`` so ``0.0001`` is the number the provider meant, not its binary neighbour) and ``spent()``
quantizes the running total half-up to six places at read time. ``spent()`` is the authority; summing
``Usage.cost_usd`` is not.

A ceiling is *crossed* when the total goes strictly past it: ``charge`` raises ``MeterExceeded`` after
recording the call that crossed it, so a run overshoots by at most one call (there is no pre-flight
cost estimate). ``guard`` refuses the next call once a ceiling is already reached, so an exhausted
meter costs nothing more.

A meter is charged with a ``Usage`` only: a ``ModelUsage`` (the model-neutral convention, whose input
includes the cached prefix) is a ``TypeError`` until it is converted with ``to_usage()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol, runtime_checkable

from core.contracts.errors import ErrorClass, KeelError
from core.contracts.types import Scope, Usage

MONEY_PLACES = Decimal("0.000001")


class MeterExceeded(KeelError):
    """A ceiling was crossed (run budget or tenant quota); ``reason`` says which and by how much."""

    # Retrying a call the meter refused can only be refused again.
    error_class: ErrorClass = ErrorClass.PERMANENT

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def to_money(value: Decimal | int | float | str) -> Decimal:
    """An exact ``Decimal`` for a monetary amount; floats are read through ``str``."""
    amount = value if isinstance(value, Decimal) else Decimal(str(value))
    if not amount.is_finite():
        raise ValueError(f"a monetary amount must be finite, got {value!r}")
    return amount


def _quantize(amount: Decimal) -> Decimal:
    return amount.quantize(MONEY_PLACES, rounding=ROUND_HALF_UP)


def _ceiling(value: Decimal | int | float | str | None, what: str) -> Decimal | None:
    if value is None:
        return None
    amount = to_money(value)
    if amount < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    return amount


def _count_ceiling(value: int | None, what: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return value


def _require_usage(usage: object) -> None:
    # A ledger takes one convention; the model-neutral one counts the cached prefix as input too.
    if not isinstance(usage, Usage):
        hint = " (convert it with .to_usage())" if hasattr(usage, "to_usage") else ""
        raise TypeError(f"a meter is charged with a Usage, got {type(usage).__name__}{hint}")


@runtime_checkable
class Meter(Protocol):
    """Guard a ceiling before a call, charge usage after it; both raise ``MeterExceeded``."""

    def guard(self, scope: Scope) -> None: ...

    def charge(self, usage: Usage, scope: Scope) -> None: ...


class Budget:
    """One run's ceiling: ``max_cost_usd`` (Decimal) and ``max_calls``; either may be unlimited."""

    def __init__(self, max_cost_usd: Decimal | int | str | None = None, max_calls: int | None = None) -> None:
        self.max_cost_usd = _ceiling(max_cost_usd, "max_cost_usd")
        self.max_calls = _count_ceiling(max_calls, "max_calls")
        self.calls = 0
        self.usage = Usage()
        self._spent = Decimal(0)

    def spent(self) -> Decimal:
        """What the run has spent, half-up to six places: the number to reconcile against."""
        return _quantize(self._spent)

    def remaining(self) -> Decimal | None:
        """Headroom under the cost ceiling, or ``None`` when there is none."""
        if self.max_cost_usd is None:
            return None
        return max(Decimal(0), _quantize(self.max_cost_usd - self._spent))

    def exhausted(self) -> bool:
        """True once another call would cross a ceiling (what ``guard`` refuses)."""
        return self._reached() is not None

    def guard(self, scope: Scope | None = None) -> None:
        reason = self._reached()
        if reason is not None:
            raise MeterExceeded(f"budget exhausted: {reason}")

    def charge(self, usage: Usage, scope: Scope | None = None) -> None:
        _require_usage(usage)
        self.calls += 1
        self.usage = self.usage + usage
        self._spent += to_money(usage.cost_usd)
        if self.max_cost_usd is not None and self._spent > self.max_cost_usd:
            raise MeterExceeded(f"budget exceeded: spent ${self.spent()} > ${self.max_cost_usd}")
        if self.max_calls is not None and self.calls > self.max_calls:
            raise MeterExceeded(f"budget exceeded: {self.calls} calls > {self.max_calls}")

    def _reached(self) -> str | None:
        if self.max_cost_usd is not None and self._spent >= self.max_cost_usd:
            return f"spent ${self.spent()} of ${self.max_cost_usd}"
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"{self.calls} of {self.max_calls} calls made"
        return None

    def __repr__(self) -> str:
        return (
            f"Budget(max_cost_usd={self.max_cost_usd}, max_calls={self.max_calls}, "
            f"spent={self.spent()}, calls={self.calls})"
        )


@dataclass
class TenantUsage:
    """One tenant's consumption inside the current quota window."""

    calls: int = 0
    tokens: int = 0
    spent: Decimal = Decimal(0)
    window_start: float = 0.0


class Quota:
    """A per-tenant ceiling, keyed by ``Scope.key()``, optionally over a fixed time window.

    With ``window_s`` set, a tenant's counters restart once ``window_s`` seconds (by ``now``, an
    injectable clock function) have passed since its window opened: ``max_calls=60, window_s=60`` is
    a requests-per-minute limit. Without it the ceilings are lifetime totals for this meter.
    """

    def __init__(
        self,
        *,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        max_cost_usd: Decimal | int | str | None = None,
        window_s: float | None = None,
        now: Callable[[], float] | None = None,
    ) -> None:
        if window_s is not None and window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s!r}")
        self.max_calls = _count_ceiling(max_calls, "max_calls")
        self.max_tokens = _count_ceiling(max_tokens, "max_tokens")
        self.max_cost_usd = _ceiling(max_cost_usd, "max_cost_usd")
        self.window_s = window_s
        self._now = now if now is not None else time.monotonic
        self._tenants: dict[str, TenantUsage] = {}

    def usage_for(self, scope: Scope) -> TenantUsage:
        """The tenant's counters in its current window (a fresh record for an unseen tenant)."""
        key = scope.key()
        now = self._now()
        tenant = self._tenants.get(key)
        if tenant is None or (self.window_s is not None and now - tenant.window_start >= self.window_s):
            tenant = TenantUsage(window_start=now)
            self._tenants[key] = tenant
        return tenant

    def guard(self, scope: Scope) -> None:
        tenant = self.usage_for(scope)
        if self.max_calls is not None and tenant.calls >= self.max_calls:
            raise MeterExceeded(f"quota for {scope.key()}: {tenant.calls} of {self.max_calls} calls made")
        if self.max_tokens is not None and tenant.tokens >= self.max_tokens:
            raise MeterExceeded(f"quota for {scope.key()}: {tenant.tokens} of {self.max_tokens} tokens used")
        if self.max_cost_usd is not None and tenant.spent >= self.max_cost_usd:
            raise MeterExceeded(
                f"quota for {scope.key()}: spent ${_quantize(tenant.spent)} of ${self.max_cost_usd}"
            )

    def charge(self, usage: Usage, scope: Scope) -> None:
        _require_usage(usage)
        tenant = self.usage_for(scope)
        tenant.calls += 1
        tenant.tokens += usage.total_tokens
        tenant.spent += to_money(usage.cost_usd)
        if self.max_calls is not None and tenant.calls > self.max_calls:
            raise MeterExceeded(f"quota for {scope.key()} exceeded: {tenant.calls} calls > {self.max_calls}")
        if self.max_tokens is not None and tenant.tokens > self.max_tokens:
            raise MeterExceeded(
                f"quota for {scope.key()} exceeded: {tenant.tokens} tokens > {self.max_tokens}"
            )
        if self.max_cost_usd is not None and tenant.spent > self.max_cost_usd:
            raise MeterExceeded(
                f"quota for {scope.key()} exceeded: spent ${_quantize(tenant.spent)} > ${self.max_cost_usd}"
            )
