"""ModelUsage: the model-neutral convention, and the explicit conversion a ledger requires."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.contracts.accounting import ModelUsage
from core.contracts.types import Scope, Usage
from core.runtime import Budget, Quota


def test_to_usage_subtracts_the_cached_prefix_and_joins_the_ttl_buckets() -> None:
    neutral = ModelUsage(
        input_tokens=1200,
        output_tokens=40,
        cache_read_tokens=900,
        cache_write_5m_tokens=60,
        cache_write_1h_tokens=40,
        cost_usd=Decimal("0.001234"),
    )
    assert neutral.to_usage() == Usage(
        input_tokens=200, output_tokens=40, cache_read_tokens=900, cache_write_tokens=100, cost_usd=0.001234
    )
    assert neutral.to_usage().total_tokens == 1240  # every token counted once


def test_from_usage_round_trips() -> None:
    usage = Usage(input_tokens=5, output_tokens=2, cache_read_tokens=7, cache_write_tokens=3, cost_usd=0.25)
    neutral = ModelUsage.from_usage(usage)
    assert neutral.input_tokens == 15 and neutral.cost_usd == Decimal("0.25")
    assert neutral.to_usage() == usage


def test_addition_is_exact_in_decimal() -> None:
    total = sum((ModelUsage(cost_usd=Decimal("0.1")) for _ in range(3)), ModelUsage())
    assert total.cost_usd == Decimal("0.3")


def test_an_inconsistent_usage_is_refused() -> None:
    with pytest.raises(ValueError, match="must include the cached prefix"):
        ModelUsage(input_tokens=10, cache_read_tokens=11)
    with pytest.raises(ValueError, match="reasoning"):
        ModelUsage(output_tokens=1, reasoning_tokens=2)
    with pytest.raises(TypeError, match="Decimal"):
        ModelUsage(cost_usd=0.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        ModelUsage(input_tokens=-1)


def test_a_ledger_refuses_the_other_convention_until_it_is_converted() -> None:
    neutral = ModelUsage(input_tokens=100, cache_read_tokens=90, cost_usd=Decimal("0.01"))
    budget = Budget()
    with pytest.raises(TypeError, match=r"convert it with \.to_usage\(\)"):
        budget.charge(neutral)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Usage"):
        Quota().charge(neutral, Scope())  # type: ignore[arg-type]
    assert budget.calls == 0
    budget.charge(neutral.to_usage())
    assert budget.spent() == Decimal("0.010000") and budget.usage.input_tokens == 10
