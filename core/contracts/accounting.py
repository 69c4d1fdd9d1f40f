"""The model-neutral accounting convention, and its explicit conversion to ``Usage``.

Keel has two ways of writing down what a call consumed, and they are kept apart on purpose:

* ``core.contracts.types.Usage`` is the one the chat path, the middlewares and the meters use:
  ``input_tokens`` counts only the *uncached* part of the prompt, cache writes are one number, and
  ``cost_usd`` is a display float.
* ``ModelUsage`` (here) is the neutral one a provider reading its own wire format fills in:
  ``input_tokens`` is the *whole* prompt, cached prefix included (the convention both OpenAI-style
  APIs and the ``codex`` CLI report), cache writes are split by their time-to-live (a five-minute and
  a one-hour bucket, priced differently), reasoning tokens are reported inside ``output_tokens``, and
  ``cost_usd`` is an exact ``Decimal``.

Adding one to the other would double-count the cached prefix, so they never mix silently:
``ModelUsage`` is not a ``Usage``, ``Budget.charge`` and ``Quota.charge`` refuse anything that is not
a ``Usage`` with a ``TypeError``, and ``to_usage()`` is the conversion (``from_usage()`` the way
back). A ``ModelUsage`` whose cached and cache-written parts exceed its input is refused at
construction: it cannot be converted without inventing a negative count.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from core.contracts.types import Usage

__all__ = ["ModelUsage"]

_set = object.__setattr__


def _count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """One call's consumption in the neutral convention (input inclusive of the cached prefix)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_5m_tokens",
            "cache_write_1h_tokens",
            "reasoning_tokens",
        ):
            _count(getattr(self, name), name)
        cost = self.cost_usd
        if not isinstance(cost, Decimal):
            if isinstance(cost, bool) or not isinstance(cost, int | str):
                raise TypeError(f"cost_usd must be a Decimal (or an int or str), got {cost!r}")
            _set(self, "cost_usd", Decimal(cost))
        if not self.cost_usd.is_finite() or self.cost_usd < 0:
            raise ValueError(f"cost_usd must be a non-negative amount, got {cost!r}")
        if self.cached_part > self.input_tokens:
            raise ValueError(
                f"cache reads and writes ({self.cached_part}) exceed input_tokens ({self.input_tokens}): "
                "input_tokens must include the cached prefix"
            )
        if self.reasoning_tokens > self.output_tokens:
            raise ValueError("reasoning_tokens are part of output_tokens and cannot exceed them")

    @property
    def cache_write_tokens(self) -> int:
        """Both cache-write buckets together."""
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def cached_part(self) -> int:
        """The part of the prompt that was read from or written to the cache."""
        return self.cache_read_tokens + self.cache_write_tokens

    @property
    def uncached_input_tokens(self) -> int:
        """The prompt tokens that were neither read from nor written to the cache."""
        return self.input_tokens - self.cached_part

    def __add__(self, other: ModelUsage) -> ModelUsage:
        if not isinstance(other, ModelUsage):
            return NotImplemented
        return ModelUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_5m_tokens + other.cache_write_5m_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cost_usd + other.cost_usd,
        )

    def to_usage(self) -> Usage:
        """The same consumption in ``Usage``'s convention, ready for a meter or a result."""
        return Usage(
            input_tokens=self.uncached_input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cost_usd=float(self.cost_usd),
        )

    @classmethod
    def from_usage(cls, usage: Usage) -> ModelUsage:
        """A ``Usage`` read into this convention; its cache writes go to the five-minute bucket."""
        return cls(
            input_tokens=usage.prompt_tokens,  # the one token rule (core.contracts.genai)
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_5m_tokens=usage.cache_write_tokens,
            cost_usd=Decimal(str(usage.cost_usd)),
        )
