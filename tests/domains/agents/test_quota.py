"""The spend-limit parts: the caps setting, UTC periods, the shared ledger and the chat policy."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from core.contracts.middleware import Call, chain
from core.contracts.types import ChatRequest, Delta, Message, Role, Usage
from core.state.kv import InMemoryStore
from domains.agents.runs.quota import Cap, Payer, QuotaExceeded, SpendLedger, load_caps, spend_policy, window


def test_caps_are_read_from_json_and_mistakes_are_named() -> None:
    caps = load_caps(
        json.dumps({"user": {"day": {"usd": "1.5", "tokens": 100}}, "agent": {"month": {"usd": 3}}})
    )
    assert caps == [Cap("user", "day", Decimal("1.5"), 100), Cap("agent", "month", Decimal(3), None)]
    assert load_caps("") == []
    for bad, named in (
        ("[1]", "JSON object"),
        ('{"team": {}}', "'team'"),
        ('{"user": {"week": {"usd": 1}}}', "'week'"),
        ('{"user": {"day": {"usd": "-1"}}}', "user.day.usd"),
        ('{"user": {"day": {"usd": "lots"}}}', "user.day.usd"),
        ('{"user": {"day": {"tokens": 1.5}}}', "user.day.tokens"),
        ('{"user": {"day": {"dollars": 1}}}', "'day'"),
        ("{", "not valid JSON"),
    ):
        with pytest.raises(ValueError, match="AGENTS_SPEND_LIMITS") as caught:
            load_caps(bad)
        assert named in str(caught.value)


def test_periods_are_utc_days_and_months_with_their_reset() -> None:
    moment = datetime(2026, 12, 31, 23, 59, tzinfo=UTC).timestamp()
    assert window("day", moment) == ("2026-12-31", datetime(2027, 1, 1, tzinfo=UTC).timestamp())
    assert window("month", moment) == ("2026-12", datetime(2027, 1, 1, tzinfo=UTC).timestamp())
    assert (
        window("month", datetime(2026, 2, 3, tzinfo=UTC).timestamp())[1]
        == datetime(2026, 3, 1, tzinfo=UTC).timestamp()
    )


async def test_the_ledger_refuses_once_a_cap_is_reached_and_counts_per_name() -> None:
    now = [datetime(2026, 12, 2, 12, tzinfo=UTC).timestamp()]
    ledger = SpendLedger(
        InMemoryStore(),
        [Cap("user", "day", usd=Decimal("0.001")), Cap("tenant", "month", tokens=100)],
        clock=lambda: now[0],
    )
    ann, bob = Payer("ann", "acme", "a"), Payer("bob", None, "a")
    await ledger.check(ann)
    await ledger.charge(ann, Decimal("0.0008991"), 40)  # rounded up to whole micro-dollars: 0.000900
    await ledger.check(ann)
    await ledger.charge(ann, Decimal("0.0001"), 40)
    with pytest.raises(QuotaExceeded) as caught:
        await ledger.check(ann)
    assert (caught.value.scope, caught.value.unit) == ("user", "usd")
    assert caught.value.resets_at == datetime(2026, 12, 3, tzinfo=UTC).timestamp()
    await ledger.check(bob)  # another user, no tenant
    await ledger.charge(Payer("cy", "acme", "a"), Decimal(0), 20)
    with pytest.raises(QuotaExceeded, match="tenant 'acme' has spent its monthly 100 tokens"):
        await ledger.check(Payer("cy", "acme", "a"))
    rows = await ledger.usage("user", "ann")
    assert rows[0]["usd_spent"] == "0.001000" and rows[0]["tokens_spent"] == 80
    now[0] = datetime(2026, 12, 3, 0, 0, 1, tzinfo=UTC).timestamp()
    with pytest.raises(QuotaExceeded, match="tenant 'acme'"):  # a new day, but the same month
        await ledger.check(ann)
    assert (await ledger.usage("user", "ann"))[0]["usd_spent"] == "0.000000"
    assert await SpendLedger(InMemoryStore(), []).usage("user", "ann") == []


class Model:
    def __init__(self, usage: Usage | None) -> None:
        self.usage = usage

    async def __call__(self, call: Call):  # type: ignore[no-untyped-def]
        yield Delta(text="hello there")
        yield Delta(finish_reason="stop", usage=self.usage)


async def deltas(policy, model: Model) -> list[Delta]:  # type: ignore[no-untyped-def]
    request = ChatRequest(messages=[Message(Role.USER, "x" * 40)], model="m")
    return [d async for d in chain([policy], model)(Call("chat", request, ctx=None))]


async def test_the_policy_charges_reported_usage_and_estimates_missing_usage() -> None:
    store = InMemoryStore()
    ledger = SpendLedger(store, [Cap("agent", "day", usd=Decimal(1), tokens=10_000)])
    payer = Payer(None, None, "a")
    estimates: list[int] = []
    policy = spend_policy(
        ledger, payer, price=lambda model, i, o: None, on_estimate=lambda: estimates.append(1)
    )

    reported = await deltas(policy, Model(Usage(input_tokens=7, output_tokens=3, cost_usd=0.25)))
    assert [d.usage for d in reported if d.usage] == [Usage(input_tokens=7, output_tokens=3, cost_usd=0.25)]
    assert estimates == []

    estimated = await deltas(policy, Model(Usage()))  # all zero: no usage at all
    (usage,) = [d.usage for d in estimated if d.usage]
    assert (usage.input_tokens, usage.output_tokens) == (10, 3)  # 40 and 11 characters, 4 a token
    assert usage.cost_usd == pytest.approx(13 * 10 / 1_000_000)  # the default $10 per million
    assert estimates == [1]
    (row,) = await ledger.usage("agent", "a")
    assert row["tokens_spent"] == 23 and Decimal(row["usd_spent"]) == Decimal("0.250130")

    priced = spend_policy(ledger, payer, price=lambda model, i, o: 0.5)
    (usage,) = [d.usage for d in await deltas(priced, Model(None)) if d.usage]
    assert usage.cost_usd == 0.5
    await deltas(priced, Model(None))  # $0.75 spent before it: allowed, and crosses the cap
    with pytest.raises(QuotaExceeded):  # $1.25 spent of $1: refused before the model is called
        await deltas(priced, Model(None))
