"""Budget and Quota: exact Decimal money, half-up to six places, ceilings guarded and charged."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.contracts.errors import ErrorClass, KeelError, classify
from core.contracts.types import Scope, Usage
from core.runtime import Budget, Meter, MeterExceeded, Quota
from core.testing import FakeClock


def usage(cost: float = 0.0, tokens: int = 0) -> Usage:
    return Usage(input_tokens=tokens, cost_usd=cost)


def test_a_fresh_budget_has_spent_nothing_printed_to_six_places() -> None:
    budget = Budget(max_cost_usd=Decimal("0.10"), max_calls=3)
    assert str(budget.spent()) == "0.000000" and budget.calls == 0
    assert budget.max_cost_usd == Decimal("0.10") and isinstance(budget.max_cost_usd, Decimal)
    assert budget.remaining() == Decimal("0.100000")
    assert Budget().remaining() is None


def test_spent_is_exact_then_quantized_half_up() -> None:
    budget = Budget()
    for _ in range(3):
        budget.charge(usage(0.0000004))
    assert budget.spent() == Decimal("0.000001")  # 0.0000012, accumulated exactly
    tie = Budget()
    tie.charge(usage(0.0000025))
    assert tie.spent() == Decimal("0.000003")  # half-up; half-even would give 0.000002


def test_float_costs_are_read_as_the_decimal_they_print_as() -> None:
    budget = Budget()
    for _ in range(1000):
        budget.charge(usage(0.0001))
    assert budget.spent() == Decimal("0.100000") and budget.calls == 1000


def test_charge_raises_once_the_cost_ceiling_is_crossed() -> None:
    budget = Budget(max_cost_usd="0.00025")
    budget.charge(usage(0.0001))
    budget.charge(usage(0.0001))
    with pytest.raises(MeterExceeded, match="spent") as info:
        budget.charge(usage(0.0001))
    assert budget.calls == 3 and budget.spent() == Decimal("0.000300")  # the crossing call is recorded
    assert isinstance(info.value, KeelError) and info.value.reason


def test_reaching_a_ceiling_exactly_does_not_cross_it_but_the_guard_refuses_more() -> None:
    budget = Budget(max_cost_usd=Decimal("0.0002"), max_calls=5)
    budget.charge(usage(0.0001))
    budget.charge(usage(0.0001))
    assert budget.exhausted()
    with pytest.raises(MeterExceeded, match="budget exhausted"):
        budget.guard()


def test_call_ceiling() -> None:
    budget = Budget(max_calls=2)
    budget.guard()
    budget.charge(usage())
    budget.guard()
    budget.charge(usage())
    with pytest.raises(MeterExceeded, match="2 of 2 calls"):
        budget.guard()
    with pytest.raises(MeterExceeded, match="3 calls > 2"):
        budget.charge(usage())


def test_usage_is_accumulated() -> None:
    budget = Budget()
    budget.charge(Usage(10, 5, cost_usd=0.0001))
    budget.charge(Usage(1, 2, cost_usd=0.0001))
    assert (budget.usage.input_tokens, budget.usage.output_tokens) == (11, 7)


@pytest.mark.parametrize("bad", [Decimal("-1"), "-0.01", "nan", "inf"])
def test_bad_cost_ceilings_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        Budget(max_cost_usd=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_call_ceilings_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        Budget(max_calls=bad)  # type: ignore[arg-type]


def test_meter_exceeded_is_never_retried() -> None:
    assert classify(MeterExceeded("x")) is ErrorClass.PERMANENT


def test_both_meters_satisfy_the_protocol() -> None:
    assert isinstance(Budget(), Meter) and isinstance(Quota(), Meter)


@given(st.lists(st.decimals(min_value=0, max_value=1, places=7), max_size=30))
def test_spent_equals_the_exact_sum_quantized(costs: list[Decimal]) -> None:
    budget = Budget()
    for cost in costs:
        budget.charge(usage(float(cost)))
    exact = sum((Decimal(str(float(c))) for c in costs), Decimal(0))
    assert budget.spent() == exact.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)


def test_quota_keeps_tenants_apart() -> None:
    quota = Quota(max_calls=1)
    a, b = Scope(1, 1), Scope(2, 1)
    quota.guard(a)
    quota.charge(usage(), a)
    with pytest.raises(MeterExceeded, match="org1:dom1"):
        quota.guard(a)
    quota.guard(b)  # another tenant is untouched
    assert quota.usage_for(a).calls == 1 and quota.usage_for(b).calls == 0


def test_quota_token_and_cost_ceilings() -> None:
    quota = Quota(max_tokens=20, max_cost_usd="0.0002")
    scope = Scope(3, 3)
    quota.charge(usage(0.0001, tokens=15), scope)
    with pytest.raises(MeterExceeded, match="tokens"):
        quota.charge(usage(0.00005, tokens=15), scope)
    other = Scope(4, 4)
    quota.charge(usage(0.0002), other)
    with pytest.raises(MeterExceeded, match="spent"):
        quota.guard(other)


def test_a_quota_window_restarts_the_counters() -> None:
    clock = FakeClock()
    quota = Quota(max_calls=2, window_s=60, now=clock.now)
    scope = Scope()
    quota.charge(usage(), scope)
    quota.charge(usage(), scope)
    with pytest.raises(MeterExceeded):
        quota.guard(scope)
    clock.advance(59)
    with pytest.raises(MeterExceeded):
        quota.guard(scope)
    clock.advance(1)
    quota.guard(scope)
    assert quota.usage_for(scope).calls == 0


def test_a_quota_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Quota(window_s=0)
