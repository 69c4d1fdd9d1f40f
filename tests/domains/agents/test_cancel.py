"""Cancelling runs: at the next safe point, forced when a tool never returns, refused once ended."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.domains.agents.agents_kit import (
    OPS_AGENT_PLUGIN,
    agents_root,
    call,
    collect_events,
    script,
    wait_for_line,
    wait_for_status,
)
from tests.domains.agents.conftest import Files
from tests.kit import serving

WAITING = script(
    {"content": "Waiting.", "tool_calls": [call("c1", "wait_for_gate")]},
    {"content": "never asked for: the run was cancelled"},
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_LLM_SCRIPT", WAITING)
    return agents_root(tmp_path, example=False, plugins={"ops_agent.py": OPS_AGENT_PLUGIN})


async def test_a_cancelled_run_stops_at_its_next_safe_point(root: Path, files: Files) -> None:
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
        answer = await client.post(f"/agents/runs/{run_id}/cancel")
        assert answer.status_code == 202 and answer.json() == {"id": run_id, "status": "cancelling"}
        files.gate.touch()  # the tool returns; the run stops before calling the model again
        body = await wait_for_status(client, run_id, ["cancelled", "completed", "failed"])
        assert body["status"] == "cancelled" and body["reason"] == "cancelled"
        assert body["error"] == "cancelled: cancelled through the API"
        assert body["model_calls"] == 1
        events = await collect_events(client, run_id)
        assert [e["event"] for e in events][-3:] == ["tool_call", "tool_result", "final"]
        again = await client.post(f"/agents/runs/{run_id}/cancel")
        assert again.status_code == 409 and "already ended (cancelled)" in again.json()["error"]["message"]
        assert len(kernel.container.get_raw_tools()["llm"].requests) == 1  # type: ignore[attr-defined]


async def test_a_run_stuck_in_a_tool_is_cancelled_by_force_after_the_grace(
    root: Path, files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTS_CANCEL_GRACE_SECONDS", "0.1")
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
        assert (await client.post(f"/agents/runs/{run_id}/cancel")).status_code == 202
        body = await wait_for_status(client, run_id, ["cancelled"])
        assert body["error"] == "cancelled through the API (forced)"
        events = await collect_events(client, run_id)
        assert events[-1]["event"] == "final" and events[-1]["data"]["status"] == "cancelled"


async def test_a_cancelled_run_is_not_resumed_after_a_restart(
    root: Path, files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTS_CANCEL_GRACE_SECONDS", "0.1")
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
        await client.post(f"/agents/runs/{run_id}/cancel")
        await wait_for_status(client, run_id, ["cancelled"])
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        body = (await client.get(f"/agents/runs/{run_id}")).json()
        assert body["status"] == "cancelled"
        assert files.gate_entries() == 1
        listed = (await client.get("/agents/runs")).json()["runs"]
        assert [(r["id"], r["status"]) for r in listed] == [(run_id, "cancelled")]
