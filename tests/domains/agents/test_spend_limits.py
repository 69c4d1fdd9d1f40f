"""Spend limits over HTTP: caps shared by two kernels through one Redis store, a start refused with
429 ``quota_exceeded``, a running run stopped at its next model call, and estimated usage charged
when the model server reports none."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from tests.conftest import RedisNamespace
from tests.domains.agents.agents_kit import agents_root, call, collect_events, script
from tests.kit import serving

CALL_COST = Decimal("0.0001")  # FakeLLM's default usage: 10 in, 5 out, $0.0001


@pytest.fixture
def two_call_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT",
        script(
            {"content": "Let me look.", "tool_calls": [call("c1", "find_products", query="lamp")]},
            {"content": "The desk lamp costs 39 euros."},
        ),
    )


async def test_a_cap_is_shared_by_two_kernels_through_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_namespace: RedisNamespace, two_call_script: None
) -> None:
    monkeypatch.setenv("STORE_URL", redis_namespace.url)
    monkeypatch.setenv("STORE_KEY_PREFIX", redis_namespace.prefix)
    monkeypatch.setenv("AGENTS_SPEND_LIMITS", json.dumps({"user": {"day": {"usd": "0.00025"}}}))
    tools = ("http", "db", "checkpoint", "store", "system")
    first, second = agents_root(tmp_path, tools=tools, name="a"), agents_root(tmp_path, tools=tools, name="b")
    async with serving(first) as (kernel, url_a), serving(second) as (_, url_b):
        dumped = kernel.registry.get_system_dump()["domains"]["agents"]["spend_limits"]
        assert dumped == [{"scope": "user", "period": "day", "usd": "0.00025", "tokens": None}]
        async with httpx.AsyncClient(base_url=url_a) as a, httpx.AsyncClient(base_url=url_b) as b:
            done = await a.post("/agents/products/runs", json={"input": "lamp?"})
            final = (await collect_events(a, done.json()["id"]))[-1]["data"]
            assert final["status"] == "completed"  # two calls: $0.0002 of $0.00025

            stopped = await b.post("/agents/products/runs", json={"input": "lamp?"})
            assert stopped.status_code == 202, stopped.text  # $0.0002 spent: under the cap
            events = await collect_events(b, stopped.json()["id"])
            assert [e["event"] for e in events].count("tool_result") == 1
            final = events[-1]["data"]
            assert (final["status"], final["reason"]) == ("failed", "budget_exhausted")
            assert final["error"].startswith("quota_exceeded: user 'anonymous' has spent its daily $0.00025")

            for client in (a, b):
                refused = await client.post("/agents/products/runs", json={"input": "lamp?"})
                assert refused.status_code == 429, refused.text
                assert refused.json()["error"]["kind"] == "quota_exceeded"
                assert "resets at" in refused.json()["error"]["message"]
                assert 1 <= int(refused.headers["retry-after"]) <= 86_400

            usage = (await b.get("/agents/usage")).json()
            (user_day,) = [row for row in usage["usage"] if row["scope"] == "user"]
            spent = Decimal(user_day["usd_spent"])
            assert spent == 3 * CALL_COST  # the call that crossed the cap, and no more
            assert spent <= Decimal(user_day["usd_cap"]) + CALL_COST
            assert user_day["tokens_spent"] == 3 * 15
            assert usage["caps"] == [{"scope": "user", "period": "day", "usd": "0.00025", "tokens": None}]


async def test_a_server_without_usage_is_charged_an_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT",
        script(
            {"content": "Let me look.", "tool_calls": [call("c1", "find_products", query="lamp")]},
            {"content": "The desk lamp costs 39 euros."},
            {"content": "Let me look again.", "tool_calls": [call("c2", "find_products", query="lamp")]},
        ),
    )
    monkeypatch.setenv("FAKE_LLM_NO_USAGE", "1")
    monkeypatch.setenv("AGENTS_ESTIMATE_USD_PER_MILLION_TOKENS", "1000")
    monkeypatch.setenv("AGENTS_SPEND_LIMITS", json.dumps({"agent": {"month": {"tokens": 1_000_000}}}))
    root = agents_root(tmp_path)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        started = await client.post("/agents/products/runs", json={"input": "Is there a desk lamp?"})
        run_id = started.json()["id"]
        final = (await collect_events(client, run_id))[-1]["data"]
        assert final["status"] == "completed"
        body = (await client.get(f"/agents/runs/{run_id}")).json()
        assert body["usage_estimated"] is True and body["estimated_calls"] == 2
        tokens = body["usage"]["total_tokens"]
        assert tokens > 0 and body["usage"]["input_tokens"] > 0
        assert Decimal(body["cost_usd"]) > 0  # priced at $1000 per million tokens
        assert Decimal(body["cost_usd"]) == pytest.approx(
            Decimal(tokens) * Decimal("0.001"), abs=Decimal("0.00001")
        )

        # a dollar budget applies to the estimate: a run allowed less than one call's estimate stops
        tight = await client.post(
            "/agents/products/runs",
            json={"input": "Is there a desk lamp?", "budget": {"max_cost_usd": "0.00001"}},
        )
        assert tight.status_code == 202, tight.text
        final = (await collect_events(client, tight.json()["id"]))[-1]["data"]
        assert final["reason"] == "budget_exhausted"

        usage = (await client.get("/agents/usage")).json()["usage"]
        (agent_month,) = [row for row in usage if row["scope"] == "agent"]
        assert agent_month["name"] == "products" and agent_month["tokens_spent"] >= tokens
