"""Two processes on one database and one run: the checkpoints let exactly one of them continue it.

Process A is inside a side-effecting call when process B boots and resumes the run (A did not
die: its lease on the run lapsed, as when a process hangs for longer than its lease, and B took
the run over). B's take-over checkpoint wins, so when A's call returns, A's next save
is refused and A stops, without a second model call or a second email. Both processes are kernels
in this test process, on separate project roots sharing one SQLite database.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from core import Kernel
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
from tests.kit import serving, until


def manager_of(kernel: Kernel) -> object:
    return kernel.plugins["agents.AgentRunsPlugin"].instance.manager  # type: ignore[attr-defined]


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_two_producers_on_one_run_id_never_both_continue_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files, database: str
) -> None:
    from tests.tools.store.services import postgres_url

    if database == "postgresql":
        async with postgres_url() as url:
            await _scenario(tmp_path, monkeypatch, files, url)
    else:
        await _scenario(tmp_path, monkeypatch, files, f"sqlite:///{tmp_path}/shared.db")


async def _scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files, database_url: str) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("HOLD_AFTER_SEND", str(files.hold))
    first_root = agents_root(tmp_path, example=False, plugins={"ops.py": OPS_AGENT_PLUGIN}, name="a")
    second_root = agents_root(tmp_path, example=False, plugins={"ops.py": OPS_AGENT_PLUGIN}, name="b")
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "send_email", to="cy@example.org")]})
    )
    async with serving(first_root) as (first, first_url), httpx.AsyncClient(base_url=first_url) as a:
        run_id = (await a.post("/agents/ops/runs", json={"input": "email Cy"})).json()["id"]
        await wait_for_line(files.sent_log)  # A is inside send_email, holding
        await first.container.get("db").execute(
            "UPDATE agent_runs SET owner = NULL, lease_expires_at = NULL WHERE id = $1", [run_id]
        )  # A's lease lapses: another process may now take the run over

        monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "Cy may have been emailed."}))
        async with serving(second_root) as (second, second_url), httpx.AsyncClient(base_url=second_url) as b:
            body = await wait_for_status(b, run_id, ["completed", "failed"])
            assert body["status"] == "completed", body
            assert body["output"] == "Cy may have been emailed."

            files.hold.touch()  # A's call returns now; A must not continue the run
            await until(lambda: run_id not in manager_of(first).live, "A stopped running the run")  # type: ignore[attr-defined]
            assert files.sent() == ["cy@example.org"]
            assert len(first.container.get_raw_tools()["llm"].requests) == 1  # type: ignore[attr-defined]
            assert len(second.container.get_raw_tools()["llm"].requests) == 1  # type: ignore[attr-defined]

            from_a = (await a.get(f"/agents/runs/{run_id}")).json()
            from_b = (await b.get(f"/agents/runs/{run_id}")).json()
            assert from_a["status"] == from_b["status"] == "completed"
            assert from_a["versions"] == from_b["versions"] == sorted(set(from_b["versions"]))
            events = await collect_events(a, run_id)
            assert [e["event"] for e in events].count("final") == 1
            assert "resumed" in [e["event"] for e in events]


async def test_cancelling_a_run_another_process_is_running_stops_that_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/shared.db")
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "wait_for_gate")]}, {"content": "no"})
    )
    first_root = agents_root(tmp_path, example=False, plugins={"ops.py": OPS_AGENT_PLUGIN}, name="a")
    second_root = agents_root(tmp_path, example=False, name="b")  # serves the API, cannot run 'ops'
    monkeypatch.setenv("AGENTS_RESUME_WAIT_SECONDS", "30")
    async with serving(first_root) as (first, first_url), httpx.AsyncClient(base_url=first_url) as a:
        run_id = (await a.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
        async with serving(second_root) as (_, second_url), httpx.AsyncClient(base_url=second_url) as b:
            answer = await b.post(f"/agents/runs/{run_id}/cancel")
            assert answer.status_code == 202 and answer.json()["status"] == "cancelled"
            files.gate.touch()
            await until(lambda: run_id not in manager_of(first).live, "A stopped running the run")  # type: ignore[attr-defined]
            assert (await a.get(f"/agents/runs/{run_id}")).json()["status"] == "cancelled"
            assert len(first.container.get_raw_tools()["llm"].requests) == 1  # type: ignore[attr-defined]
