"""What the CLI cognitions share: reading a session's JSON lines, noting what was wrong, pricing.

A coding-agent CLI reports its work as one JSON event a line. ``EventReader`` reads them from a
``CliProcess`` and turns every way a line can be unreadable into a *problem*, worded for a person:
a line that is not valid UTF-8, a line that is not complete JSON (a truncated write), a line that is
not an event object. The first problem is kept and reading goes on, because the events after it
(``claude``'s ``result``, ``codex``'s ``turn.completed``) are where the bill is: a cognition ends
such a run as ``provider_error`` with the problem as its reason *and* charges what the session
reports it spent, instead of aborting at the bad line and billing nothing.

``CliPrices`` prices a ``ModelUsage`` when the CLI reports tokens but no cost (``codex`` always,
``claude`` when its session broke before the ``result`` event), in dollars per million tokens, by
the longest model-name prefix, else ``"*"``. The defaults are list prices at the time of writing and
only an estimate; pass your own table to the cognition.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from core.contracts.accounting import ModelUsage
from core.contracts.cli import CliProcess

__all__ = ["CliPrice", "CliPrices", "EventReader", "reap", "stderr_tail"]

PER_TOKENS = Decimal(1_000_000)
MONEY_PLACES = Decimal("0.000001")


async def reap(process: CliProcess, grace: float = 5.0) -> None:
    """Kill a process the run is leaving early and collect its exit, within ``grace`` seconds."""
    process.kill()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), grace)


def stderr_tail(process: CliProcess, limit: int = 300) -> str:
    """The end of what the process wrote to stderr, on one line, for a failure reason."""
    text = " ".join(process.stderr_text().split())
    return text if len(text) <= limit else "..." + text[-limit:]


class EventReader:
    """Reads a CLI's stdout as events, keeping the first problem instead of raising on it."""

    def __init__(self, process: CliProcess, binary: str) -> None:
        self.process = process
        self.binary = binary
        self.line = 0
        self.problem: str | None = None

    def note(self, problem: str) -> None:
        if self.problem is None:
            self.problem = problem

    async def next(self) -> dict[str, Any] | None:
        """The next event, or ``None`` at the end of stdout; unreadable lines are noted and skipped."""
        while True:
            raw = await self.process.readline()
            if not raw:
                return None
            self.line += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.note(
                    f"{self.binary} wrote line {self.line} that is not valid UTF-8 "
                    f"({exc.reason} at byte {exc.start})"
                )
                continue
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                shown = text.strip()
                shown = shown if len(shown) <= 60 else shown[:60] + "..."
                self.note(
                    f"{self.binary} wrote line {self.line} that is not complete JSON "
                    f"(a truncated write?): {exc.msg}: {shown!r}"
                )
                continue
            if not isinstance(value, dict) or not isinstance(value.get("type"), str):
                self.note(f"{self.binary} wrote line {self.line} that is not an event object with a type")
                continue
            return value


@dataclass(frozen=True)
class CliPrice:
    """Dollars per million tokens; ``cache_write_1h`` defaults to twice the input price."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal

    @classmethod
    def of(
        cls,
        input: str,
        output: str,
        cache_read: str | None = None,
        cache_write_5m: str | None = None,
        cache_write_1h: str | None = None,
    ) -> CliPrice:
        base = Decimal(input)
        return cls(
            base,
            Decimal(output),
            Decimal(cache_read) if cache_read is not None else base,
            Decimal(cache_write_5m) if cache_write_5m is not None else base,
            Decimal(cache_write_1h) if cache_write_1h is not None else base * 2,
        )


class CliPrices:
    """A price table by model-name prefix, with ``"*"`` as the fallback."""

    def __init__(self, prices: Mapping[str, CliPrice]) -> None:
        self._prices = dict(prices)
        self._keys = sorted((k for k in self._prices if k != "*"), key=len, reverse=True)

    def price_for(self, model: str) -> CliPrice | None:
        for key in self._keys:
            if model.startswith(key):
                return self._prices[key]
        return self._prices.get("*")

    def cost(self, model: str, usage: ModelUsage) -> Decimal:
        """What ``usage`` costs on ``model`` (``0`` for a model the table cannot price)."""
        price = self.price_for(model)
        if price is None:
            return Decimal(0)
        total = (
            price.input * usage.uncached_input_tokens
            + price.cache_read * usage.cache_read_tokens
            + price.cache_write_5m * usage.cache_write_5m_tokens
            + price.cache_write_1h * usage.cache_write_1h_tokens
            + price.output * usage.output_tokens
        ) / PER_TOKENS
        return total.quantize(MONEY_PLACES)
