"""The agent runs API on a served kernel, with a scripted model (FakeLLM behind a tool named llm)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.domains.agents.agents_kit import agents_root, call, collect_events, script, wait_for_status
from tests.kit import serving


@pytest.fixture
def products_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT",
        script(
            {"content": "Let me look.", "tool_calls": [call("c1", "find_products", query="keyboard")]},
            {"content": "The walnut keyboard costs 149 euros; 12 are in stock."},
        ),
    )


async def test_a_react_run_reads_the_database_streams_its_steps_and_completes(
    tmp_path: Path, products_script: None
) -> None:
    root = agents_root(tmp_path)
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        agents = (await client.get("/agents")).json()["agents"]
        assert [a["name"] for a in agents] == ["products"]
        assert agents[0]["tools"] == ["find_products"] and agents[0]["model"] == "fake-model"

        started = await client.post(
            "/agents/products/runs", json={"input": "Is the walnut keyboard in stock?"}
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        assert started.json()["links"]["events"] == f"/agents/runs/{run_id}/events"

        events = await collect_events(client, run_id)
        kinds = [e["event"] for e in events]
        assert kinds[0] == "message_delta" and kinds[-1] == "final"
        assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1
        text = "".join(e["data"]["text"] for e in events if e["event"] == "message_delta")
        assert text == "Let me look.The walnut keyboard costs 149 euros; 12 are in stock."
        (result,) = [e["data"] for e in events if e["event"] == "tool_result"]
        assert result["tool_call"] == {
            "id": "c1",
            "name": "find_products",
            "arguments": {"query": "keyboard"},
        }
        assert result["result"] == [
            {"sku": "KB-101", "name": "Walnut keyboard", "price_eur": 149.0, "in_stock": 12}
        ]
        assert [e["id"] for e in events] == [f"0-{n}" for n in range(1, len(events) + 1)]
        final = events[-1]["data"]
        assert final["status"] == "completed" and final["output"].startswith("The walnut keyboard")

        body = (await client.get(f"/agents/runs/{run_id}")).json()
        assert body["status"] == "completed" and body["reason"] == "completed"
        assert body["output"] == "The walnut keyboard costs 149 euros; 12 are in stock."
        assert body["model_calls"] == 2
        assert body["usage"]["input_tokens"] == 20 and body["usage"]["output_tokens"] == 10
        assert body["cost_usd"] == "0.000200"
        # started, before the tool, after the tool, final: every step is a checkpoint
        assert body["versions"] == [1, 2, 3, 4] and body["version"] == 4

        record = await kernel.container.get("store").get(f"agents:tool:{run_id}:2:c1")
        assert record["result"] == result["result"]  # the tool result, recorded as soon as it returned

        calls = [(r["tool"], r["method"]) for r in kernel.registry.get_metrics()]
        assert calls.count(("llm", "stream")) == 2
        assert ("db", "query") in calls
        assert ("checkpoint", "save") in calls

        listed = (await client.get("/agents/runs", params={"agent": "products"})).json()["runs"]
        assert [(r["id"], r["status"]) for r in listed] == [(run_id, "completed")]


async def test_unknown_agents_runs_and_bad_input_are_clear_errors(
    tmp_path: Path, products_script: None
) -> None:
    root = agents_root(tmp_path)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        missing = await client.post("/agents/nobody/runs", json={"input": "hi"})
        assert missing.status_code == 404
        assert (
            missing.json()["error"]["message"] == "no agent named 'nobody' is declared (declared: products)"
        )
        assert (await client.get("/agents/runs/nope")).status_code == 404
        assert (await client.get("/agents/runs/nope/events")).status_code == 404
        assert (await client.post("/agents/runs/nope/cancel")).status_code == 404
        empty = await client.post("/agents/products/runs", json={"input": ""})
        assert empty.status_code == 422 and empty.json()["error"]["fields"][0]["field"] == "input"
        typo = await client.post("/agents/products/runs", json={"input": "x", "budget": {"max_cost": 1}})
        assert typo.status_code == 422
        negative = await client.post(
            "/agents/products/runs", json={"input": "x", "budget": {"max_calls": -1}}
        )
        assert negative.status_code == 422
        started = await client.post("/agents/products/runs", json={"input": "hi"})
        run_id = started.json()["id"]
        bad_cursor = await client.get(f"/agents/runs/{run_id}/events", headers={"Last-Event-ID": "seven"})
        assert bad_cursor.status_code == 422 and "not an event id" in bad_cursor.json()["error"]["message"]
        assert (await client.get("/agents/runs", params={"limit": "0"})).status_code == 422


async def test_the_budget_stops_a_run_that_would_spend_more(tmp_path: Path, products_script: None) -> None:
    root = agents_root(tmp_path)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        started = await client.post(
            "/agents/products/runs",
            json={"input": "Is the walnut keyboard in stock?", "budget": {"max_calls": 1}},
        )
        run_id = started.json()["id"]
        events = await collect_events(client, run_id)
        final = events[-1]["data"]
        assert final["status"] == "failed" and final["reason"] == "budget_exhausted"
        assert "1 of 1 calls made" in final["error"]
        body = await wait_for_status(client, run_id, ["failed"])
        assert body["model_calls"] == 1 and body["budget"] == {"max_cost_usd": None, "max_calls": 1}

        by_cost = await client.post(
            "/agents/products/runs", json={"input": "keyboard?", "budget": {"max_cost_usd": "0.00005"}}
        )
        body = await wait_for_status(client, by_cost.json()["id"], ["failed"])
        assert body["reason"] == "budget_exhausted" and body["cost_usd"] == "0.000100"


async def test_a_model_that_fails_fails_the_run_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script())  # no turns at all
    root = agents_root(tmp_path)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/products/runs", json={"input": "hello"})).json()["id"]
        body = await wait_for_status(client, run_id, ["failed"])
        assert body["reason"] == "error"
        assert body["error"].startswith("RuntimeError: FakeLLM script exhausted")
        events = await collect_events(client, run_id)
        assert events[-1]["data"]["status"] == "failed"


async def test_runs_cannot_start_without_their_checkpoints_and_say_so(
    tmp_path: Path, products_script: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = agents_root(tmp_path)
    (root / "blocker").write_text("a file where the folder should be")
    monkeypatch.setenv("CHECKPOINT_URL", "sqlite:///blocker/checkpoints.db")
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        answer = await client.post("/agents/products/runs", json={"input": "hi"})
        assert answer.status_code == 503
        assert answer.json()["error"]["message"].startswith("agent runs are unavailable right now: ")
        assert (await client.get("/agents/runs")).json()["runs"] == []  # nothing half-started is left
