"""The offline echo model drives the example agent's ReAct loop over HTTP: a tool call, its result
from the database, and an answer that echoes it; no model server, no key."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.domains.agents.agents_kit import agents_root, collect_events
from tests.kit import serving


async def test_the_echo_model_calls_the_agents_tool_and_answers_with_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    root = agents_root(tmp_path, tools=("http", "db", "checkpoint", "store", "llm"), scripted_llm=False)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        started = await client.post("/agents/products/runs", json={"input": "find_products: walnut"})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        events = await collect_events(client, run_id)

        kinds = [e["event"] for e in events]
        assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1 and kinds[-1] == "final"
        (result,) = [e["data"] for e in events if e["event"] == "tool_result"]
        assert result["tool_call"] == {
            "id": "echo-call-1",
            "name": "find_products",
            "arguments": {"query": "walnut"},
        }
        assert result["result"] == [
            {"sku": "KB-101", "name": "Walnut keyboard", "price_eur": 149.0, "in_stock": 12}
        ]
        output = events[-1]["data"]["output"]
        assert output.startswith("echo: ")
        assert json.loads(output.removeprefix("echo: ")) == result["result"]

        body = (await client.get(f"/agents/runs/{run_id}")).json()
        assert body["status"] == "completed" and body["model_calls"] == 2 and body["output"] == output

        plain = await client.post("/agents/products/runs", json={"input": "is anything in stock?"})
        plain_events = await collect_events(client, plain.json()["id"])
        assert "tool_call" not in [e["event"] for e in plain_events]
        assert plain_events[-1]["data"]["output"] == "echo: is anything in stock?"
