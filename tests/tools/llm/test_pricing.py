"""The price table: lookups by exact name, prefix and wildcard, validation, and exact arithmetic."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tools.llm.pricing import PriceTable

TABLE = PriceTable.from_json(
    '{"gpt-4o": {"input": 2.5, "output": 10},'
    ' "gpt-4o-mini": {"input": "0.15", "output": 0.6, "cache_read": 0.075}}',
    source="test",
)


def test_exact_then_longest_prefix() -> None:
    assert TABLE.cost("gpt-4o", 1_000_000, 0) == 2.5
    assert TABLE.cost("gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000) == 0.75
    assert TABLE.cost("gpt-4o-2024-08-06", 0, 1_000_000) == 10.0


def test_cache_reads_have_their_own_price_or_the_input_price() -> None:
    assert TABLE.cost("gpt-4o-mini", 0, 0, cache_read=1_000_000) == 0.075
    assert TABLE.cost("gpt-4o", 0, 0, cache_read=1_000_000) == 2.5


def test_amounts_are_exact_and_rounded_to_six_places() -> None:
    assert TABLE.cost("gpt-4o-mini", 1, 1) == 0.000001  # 0.00000075 rounds half-up
    assert TABLE.cost("gpt-4o-mini", 3, 0) == 0.0  # 0.00000045


def test_a_wildcard_prices_everything_else() -> None:
    table = PriceTable.from_json('{"*": {"input": 1, "output": 1}}', source="test")
    assert table.cost("anything", 500_000, 500_000) == 1.0


def test_an_unpriced_model_is_free_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    table = PriceTable({})
    with caplog.at_level(logging.WARNING, logger="keel.llm"):
        assert table.cost("mystery", 10, 10) == 0.0
        assert table.cost("mystery", 10, 10) == 0.0
    assert [r.getMessage() for r in caplog.records].count(
        "no price for model 'mystery' (LLM_PRICES); its calls are reported as costing 0"
    ) == 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not valid JSON"),
        ('{"m": 3}', "must be an object"),
        ('{"m": {"input": 1, "output": 1, "tip": 2}}', "unknown field(s) ['tip']"),
        ('{"m": {"input": -1, "output": 1}}', "non-negative"),
        ('{"m": {"input": true, "output": 1}}', "number of dollars"),
        ('{"m": {"input": "lots", "output": 1}}', "number of dollars"),
        ('{"m": {"input": "NaN", "output": 1}}', "non-negative"),
    ],
)
def test_a_table_that_cannot_be_used_is_refused(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="^test") as caught:
        PriceTable.from_json(text, source="test")
    assert fragment in str(caught.value)


async def test_the_tool_prices_token_counts_for_estimates(llm: Any) -> None:
    assert llm.cost("test-model", 1_000_000, 500_000) == 2.0
    assert llm.cost("", 1_000_000, 0) == 1.0  # the default model
    assert llm.cost("unpriced-model", 10, 10) is None
