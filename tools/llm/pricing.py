"""What a call cost: a price table, in US dollars per million tokens, per model.

The table is JSON (``LLM_PRICES``, or the file ``LLM_PRICES_FILE`` names)::

    {
      "gpt-4o-mini": {"input": 0.15, "output": 0.60, "cache_read": 0.075},
      "gpt-4o":      {"input": 2.50, "output": 10.00},
      "*":           {"input": 1.00, "output": 2.00}
    }

Rules:

* A model is priced by its exact name, else by the longest key that is a prefix of its name (so
  ``gpt-4o-mini`` prices ``gpt-4o-mini-2024-07-18``), else by ``"*"`` when present.
* ``input`` and ``output`` are required; ``cache_read`` and ``cache_write`` default to ``input``.
  Every price is a non-negative number. Anything else is refused when the tool starts.
* Input tokens are billed without the cached part (``Usage.input_tokens`` counts only the uncached
  prompt), cached ones at ``cache_read``.
* A model the table does not price costs ``0.0``, and the tool logs that once per model: a budget
  in dollars cannot protect a run whose calls are free, so the log line is the hint to add a price.

Amounts are computed with ``Decimal`` and rounded half-up to six decimal places, the precision of
``Usage.cost_usd``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

log = logging.getLogger("keel.llm")

PER_TOKENS = Decimal(1_000_000)
MONEY_PLACES = Decimal("0.000001")
WILDCARD = "*"
_FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per million tokens of each kind."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        total = (
            self.input * input_tokens
            + self.output * output_tokens
            + self.cache_read * cache_read
            + self.cache_write * cache_write
        ) / PER_TOKENS
        return float(total.quantize(MONEY_PLACES, rounding=ROUND_HALF_UP))


class PriceTable:
    """Prices by model name, looked up as the module docstring describes."""

    def __init__(self, prices: Mapping[str, ModelPrice]) -> None:
        self._prices = dict(prices)
        self._by_length = sorted((k for k in self._prices if k != WILDCARD), key=len, reverse=True)
        self._unpriced_logged: set[str] = set()

    @classmethod
    def from_json(cls, text: str, *, source: str) -> PriceTable:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source} is not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{source} must be a JSON object of model name to prices")
        return cls({str(model): _price(model, entry, source) for model, entry in raw.items()})

    def __len__(self) -> int:
        return len(self._prices)

    def price_for(self, model: str) -> ModelPrice | None:
        price = self._prices.get(model)
        if price is not None:
            return price
        for key in self._by_length:
            if model.startswith(key):
                return self._prices[key]
        return self._prices.get(WILDCARD)

    def cost(
        self, model: str, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
    ) -> float:
        price = self.price_for(model)
        if price is None:
            if model not in self._unpriced_logged:
                self._unpriced_logged.add(model)
                log.warning("no price for model %r (LLM_PRICES); its calls are reported as costing 0", model)
            return 0.0
        return price.cost(input_tokens, output_tokens, cache_read, cache_write)


def _price(model: str, entry: Any, source: str) -> ModelPrice:
    if not isinstance(entry, dict):
        raise ValueError(
            f'{source}: the price of {model!r} must be an object like {{"input": 0.15, "output": 0.6}}'
        )
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise ValueError(
            f"{source}: the price of {model!r} has unknown field(s) {unknown}; use {list(_FIELDS)}"
        )
    missing = [name for name in ("input", "output") if name not in entry]
    if missing:
        raise ValueError(f"{source}: the price of {model!r} needs {' and '.join(missing)}")
    amounts = {name: _amount(model, name, entry[name], source) for name in _FIELDS if name in entry}
    return ModelPrice(
        input=amounts["input"],
        output=amounts["output"],
        cache_read=amounts.get("cache_read", amounts["input"]),
        cache_write=amounts.get("cache_write", amounts["input"]),
    )


def _amount(model: str, name: str, value: Any, source: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{source}: {model!r} {name} must be a number of dollars, got {value!r}")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{source}: {model!r} {name} must be a number of dollars, got {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{source}: {model!r} {name} must be a non-negative number, got {value!r}")
    return amount
