"""Spend limits for agent runs: caps per user, per tenant and per agent, in dollars and in tokens,
per day and per month (UTC), shared by every process through the ``store`` tool.

``AGENTS_SPEND_LIMITS`` is JSON: for each scope (``user``, ``tenant``, ``agent``), for each period
(``day``, ``month``), a ``usd`` cap (a decimal string or number) and/or a ``tokens`` cap::

    {"user": {"day": {"usd": "2.50", "tokens": 200000}, "month": {"usd": "40"}},
     "agent": {"month": {"usd": "500"}}}

Each cap applies to every user (the run's owner; runs without one count as ``anonymous``), every
tenant (runs without one have no tenant cap) and every agent separately. Unset, nothing is
counted and the runs path makes no store call.

* **Before each model call** the counters of the run's user, tenant and agent are read; one at
  or over its cap refuses the call with :class:`QuotaExceeded` (a ``MeterExceeded``: the run stops
  at that safe point, ``budget_exhausted``, its error saying ``quota_exceeded`` and when the cap
  resets). Starting a run is refused the same way (429, kind ``quota_exceeded``, ``Retry-After``).
* **After it** the call's tokens and cost are added with the store's atomic ``increment`` (whole
  micro-dollars, rounded up), so processes sharing a Redis or PostgreSQL store share the caps.
  The check and the charge are not one step: calls already past the check when a cap is crossed
  still finish, so a cap is exceeded by at most the calls in flight at that moment (one per run).
* **No usage from the server**: the tokens are estimated (4 characters a token, prompt and
  answer), priced with the model's ``cost(model, input_tokens, output_tokens)`` when the ``llm``
  tool prices it (``LLM_PRICES``), else at ``AGENTS_ESTIMATE_USD_PER_MILLION_TOKENS`` (10), and the
  estimate is what is charged, to the run's own budget too: never a silent 0. The run counts such
  calls (``estimated_calls``) and says ``usage_estimated``. This holds with no caps set as well.

Keys: ``agents:spend:<scope>:<name>:<period id>:<usd_micros|tokens>``, expiring a day after the
period ends.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import Delta, Usage
from core.runtime import MeterExceeded
from core.settings import SettingError, env_raw, env_str

SCOPES = ("user", "tenant", "agent")
PERIODS = ("day", "month")
ADJECTIVE = {"day": "daily", "month": "monthly"}
UNITS = ("usd", "tokens")
ANONYMOUS = "anonymous"
KEY_PREFIX = "agents:spend:"
MICROS = Decimal(1_000_000)
CHARS_PER_TOKEN = 4
DEFAULT_ESTIMATE_PRICE = Decimal(10)  # USD per million tokens, in or out, for an unpriced model


@dataclass(frozen=True)
class Cap:
    scope: str
    period: str
    usd: Decimal | None = None
    tokens: int | None = None


def load_caps(raw: str | None = None) -> list[Cap]:
    """The caps of ``AGENTS_SPEND_LIMITS`` (or ``raw``); a ``ValueError`` says what is wrong."""
    text = env_str("AGENTS_SPEND_LIMITS") if raw is None else raw
    if not text.strip():
        return []
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"AGENTS_SPEND_LIMITS is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError("AGENTS_SPEND_LIMITS must be a JSON object of scope -> period -> caps")
    caps: list[Cap] = []
    for scope, periods in parsed.items():
        if scope not in SCOPES or not isinstance(periods, dict):
            raise ValueError(f"AGENTS_SPEND_LIMITS: {scope!r} is not one of {', '.join(SCOPES)} with periods")
        for period, limits in periods.items():
            if period not in PERIODS or not isinstance(limits, dict) or not set(limits) <= set(UNITS):
                raise ValueError(
                    f"AGENTS_SPEND_LIMITS.{scope}: {period!r} must be day or month with usd and/or tokens"
                )
            caps.append(
                Cap(scope, period, _usd(limits.get("usd"), scope, period), _tokens(limits, scope, period))
            )
    return caps


def _usd(value: Any, scope: str, period: str) -> Decimal | None:
    if value is None:
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount < 0:
        raise ValueError(
            f"AGENTS_SPEND_LIMITS.{scope}.{period}.usd must be a non-negative amount, got {value!r}"
        )
    return amount


def _tokens(limits: Mapping[str, Any], scope: str, period: str) -> int | None:
    value = limits.get("tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"AGENTS_SPEND_LIMITS.{scope}.{period}.tokens must be a whole number >= 0, got {value!r}"
        )
    return value


def window(period: str, now: float) -> tuple[str, float]:
    """``(period id, reset time)`` of the UTC day or month that contains ``now``."""
    moment = datetime.fromtimestamp(now, UTC)
    if period == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        return start.strftime("%Y-%m-%d"), (start + timedelta(days=1)).timestamp()
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start.strftime("%Y-%m"), following.timestamp()


def micros(amount: Decimal) -> int:
    return int((amount * MICROS).to_integral_value(rounding=ROUND_CEILING))


class QuotaExceeded(MeterExceeded):
    """A spend cap is reached; ``resets_at`` (unix seconds) says when it opens again."""

    def __init__(self, scope: str, name: str, period: str, unit: str, cap: Any, resets_at: float) -> None:
        self.scope, self.name, self.period, self.unit, self.cap = scope, name, period, unit, cap
        self.resets_at = resets_at
        when = datetime.fromtimestamp(resets_at, UTC).isoformat(timespec="seconds")
        shown = f"${cap}" if unit == "usd" else f"{cap} tokens"
        super().__init__(
            f"quota_exceeded: {scope} {name!r} has spent its {ADJECTIVE[period]} {shown}; resets at {when}"
        )


@dataclass(frozen=True)
class Payer:
    """Who a run's spend is counted against."""

    user: str | None
    tenant: str | None
    agent: str

    def name(self, scope: str) -> str | None:
        if scope == "user":
            return self.user or ANONYMOUS
        return self.tenant if scope == "tenant" else self.agent


class SpendLedger:
    """The shared counters of the caps, read and charged through a ``StorePort``."""

    def __init__(self, store: Any, caps: Iterable[Cap], *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.caps = list(caps)
        self.clock = clock

    @property
    def enabled(self) -> bool:
        return bool(self.caps) and self.store is not None

    def _counters(self, payer: Payer, now: float) -> list[tuple[Cap, str, str, float]]:
        """``(cap, name, key prefix, reset time)`` of every cap that applies to ``payer``."""
        found = []
        for cap in self.caps:
            name = payer.name(cap.scope)
            if name is None:
                continue
            period_id, resets = window(cap.period, now)
            found.append((cap, name, f"{KEY_PREFIX}{cap.scope}:{name}:{period_id}:", resets))
        return found

    async def check(self, payer: Payer) -> None:
        """Raise ``QuotaExceeded`` for the first cap of ``payer`` that is reached."""
        if not self.enabled:
            return
        now = self.clock()
        for cap, name, prefix, resets in self._counters(payer, now):
            if cap.usd is not None and int(await self.store.get(prefix + "usd_micros") or 0) >= micros(
                cap.usd
            ):
                raise QuotaExceeded(cap.scope, name, cap.period, "usd", cap.usd, resets)
            if cap.tokens is not None and int(await self.store.get(prefix + "tokens") or 0) >= cap.tokens:
                raise QuotaExceeded(cap.scope, name, cap.period, "tokens", cap.tokens, resets)

    async def charge(self, payer: Payer, cost_usd: Decimal, tokens: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        amount = micros(cost_usd)
        for _, _, prefix, resets in self._counters(payer, now):
            ttl = max(1.0, resets - now) + 86_400
            if amount:
                await self.store.increment(prefix + "usd_micros", amount, ttl=ttl)
            if tokens:
                await self.store.increment(prefix + "tokens", tokens, ttl=ttl)

    async def usage(self, scope: str, name: str) -> list[dict[str, Any]]:
        """Spend so far of ``name`` (a user, tenant or agent) against each cap of ``scope``."""
        if not self.enabled:
            return []
        now = self.clock()
        rows = []
        for cap in self.caps:
            if cap.scope != scope:
                continue
            period_id, resets = window(cap.period, now)
            prefix = f"{KEY_PREFIX}{scope}:{name}:{period_id}:"
            spent = Decimal(int(await self.store.get(prefix + "usd_micros") or 0)) / MICROS
            rows.append(
                {
                    "scope": scope,
                    "name": name,
                    "period": cap.period,
                    "usd_spent": str(spent.quantize(Decimal("0.000001"))),
                    "usd_cap": str(cap.usd) if cap.usd is not None else None,
                    "tokens_spent": int(await self.store.get(prefix + "tokens") or 0),
                    "tokens_cap": cap.tokens,
                    "resets_at": datetime.fromtimestamp(resets, UTC).isoformat(timespec="seconds"),
                }
            )
        return rows

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "scope": c.scope,
                "period": c.period,
                "usd": str(c.usd) if c.usd is not None else None,
                "tokens": c.tokens,
            }
            for c in self.caps
        ]


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def spend_policy(
    ledger: SpendLedger,
    payer: Payer,
    *,
    price: Callable[[str, int, int], Any] | None = None,
    on_estimate: Callable[[], None] | None = None,
) -> Middleware:
    """A chat middleware: check ``payer``'s caps before the call, charge them after it; a call that
    reports no usage is charged (and reported onwards) as an estimate."""

    async def spend_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        if call.kind != "chat":
            async for item in nxt(call):
                yield item
            return
        await ledger.check(payer)
        usage: Usage | None = None
        produced: list[str] = []
        delta: Delta
        async for delta in nxt(call):
            if delta.usage is not None and delta.usage.total_tokens:
                usage = delta.usage
            elif delta.usage is not None:
                delta = replace(delta, usage=None)  # an all-zero usage is no usage: estimated below
            produced.append(delta.text)
            for tool_call in delta.tool_calls:
                produced.append(tool_call.name + json.dumps(dict(tool_call.arguments), default=str))
            yield delta
        if usage is None:
            usage = _estimate(call, "".join(produced), price)
            if on_estimate is not None:
                on_estimate()
            yield Delta(usage=usage)
        await ledger.charge(payer, Decimal(str(usage.cost_usd)), usage.total_tokens)

    return spend_middleware


def estimate_price() -> Decimal:
    raw = env_raw("AGENTS_ESTIMATE_USD_PER_MILLION_TOKENS")
    if raw is None:
        return DEFAULT_ESTIMATE_PRICE
    try:
        value = Decimal(raw)
    except InvalidOperation:
        value = Decimal(-1)
    if not value.is_finite() or value < 0:
        raise SettingError("AGENTS_ESTIMATE_USD_PER_MILLION_TOKENS", raw, "an amount of at least 0")
    return value


def _estimate(call: Call, produced: str, price: Callable[[str, int, int], Any] | None) -> Usage:
    request: Any = call.request
    prompt = "".join(str(m.content) for m in request.messages)
    input_tokens, output_tokens = estimate_tokens(prompt), estimate_tokens(produced)
    priced = price(request.model, input_tokens, output_tokens) if price is not None else None
    if priced is None:
        fallback = estimate_price() * (input_tokens + output_tokens) / MICROS
        priced = fallback.quantize(Decimal("0.000001"), rounding=ROUND_CEILING)
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=float(priced))
