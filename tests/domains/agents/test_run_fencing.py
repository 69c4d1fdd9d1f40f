"""A process that lost its run cannot commit: the fence before a tool result is recorded, the
first-result-wins record, the stable idempotency key a tool passes on, and tools counted as
side-effecting unless they say otherwise.

The integration test is the paused-process case: process A is inside a tool call when its lease
lapses (as after a SIGSTOP longer than the lease); process B takes the run over and, the tool being
declared safe to re-run, runs the call again. Both calls carry the same idempotency key (what lets
the outside world apply the effect once), and when A's call finally returns, A records nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.contracts.middleware import Call
from core.contracts.types import ToolRequest
from core.runs.tool_records import (
    call_key,
    current_call_key,
    idempotency_key,
    is_side_effecting,
    record_tool_results,
)
from core.state.stores import CheckpointVersionConflict, InMemoryStore
from tests.domains.agents.agents_kit import (
    OPS_AGENT_PLUGIN,
    agents_root,
    call,
    script,
    wait_for_line,
    wait_for_status,
)
from tests.domains.agents.conftest import Files
from tests.kit import serving, until

SEND = 'log.write(args["to"] + "\\n")'
SAFE_SENDER_PLUGIN = (
    OPS_AGENT_PLUGIN.replace("side_effecting = True", "side_effecting = False", 1)
    .replace(
        SEND,
        SEND + '\n            with open(os.environ["KEYS_LOG"], "a") as keys:\n'
        '                keys.write(str(idempotency_key()) + "\\n")',
        1,
    )
    .replace(
        "from core.runs import catalog_for",
        "from core.runs import catalog_for, idempotency_key",
        1,
    )
)

assert SAFE_SENDER_PLUGIN.count("idempotency_key") == 2, "the ops plugin changed: update the edits above"


def test_tools_are_side_effecting_unless_they_declare_otherwise() -> None:
    class Plain:
        name = "plain"

    class Safe:
        side_effecting = False

    class Effects:
        side_effecting = True

    assert is_side_effecting(Plain()) is True
    assert is_side_effecting(Effects()) is True
    assert is_side_effecting(Safe()) is False


async def run_recorder(store: InMemoryStore, fence: Any, key: str | None, result: Any) -> Any:
    middleware = record_tool_results(store, ttl=None, fence=fence)

    async def tool(_: Call) -> AsyncIterator[Any]:
        assert idempotency_key() == key  # what the tool sees while it runs
        yield result

    token = current_call_key.set(key)
    try:
        request = ToolRequest("send", {})
        return [item async for item in middleware(Call("tool", request, None), tool)]
    finally:
        current_call_key.reset(token)


async def test_a_fenced_process_records_nothing_and_the_first_result_stays() -> None:
    store = InMemoryStore()
    key = call_key("r1", 2, "c1")

    async def lost() -> None:
        raise CheckpointVersionConflict("run 'r1': another process took it over")

    with pytest.raises(CheckpointVersionConflict):
        await run_recorder(store, lost, key, "late result")
    assert await store.get(key) is None

    async def owned() -> None:
        return None

    assert await run_recorder(store, owned, key, "first") == ["first"]
    assert await run_recorder(store, owned, key, "second") == ["second"]
    stored = await store.get(key)
    assert stored is not None and stored["result"] == "first"  # a later writer cannot replace it


async def test_a_paused_process_that_lost_its_run_commits_nothing_and_both_calls_share_one_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    keys_log = tmp_path / "keys.log"
    monkeypatch.setenv("KEYS_LOG", str(keys_log))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/shared.db")
    monkeypatch.setenv("HOLD_AFTER_SEND", str(files.hold))
    first_root = agents_root(tmp_path, example=False, plugins={"ops.py": SAFE_SENDER_PLUGIN}, name="a")
    second_root = agents_root(tmp_path, example=False, plugins={"ops.py": SAFE_SENDER_PLUGIN}, name="b")
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "send_email", to="cy@example.org")]})
    )
    async with serving(first_root) as (first, first_url), httpx.AsyncClient(base_url=first_url) as a:
        run_id = (await a.post("/agents/ops/runs", json={"input": "email Cy"})).json()["id"]
        await wait_for_line(files.sent_log)  # A is inside send_email, holding (paused, in effect)
        await first.container.get("db").execute(
            "UPDATE agent_runs SET owner = NULL, lease_expires_at = NULL WHERE id = $1", [run_id]
        )  # A's lease lapses
        monkeypatch.delenv("HOLD_AFTER_SEND")  # B's call returns at once; A's is still held
        monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "Cy was emailed."}))
        async with serving(second_root) as (second, second_url), httpx.AsyncClient(base_url=second_url) as b:
            body = await wait_for_status(b, run_id, ["completed", "failed"])
            assert body["status"] == "completed", body
            key = call_key(run_id, 2, "c1")
            assert (await second.container.get("store").get(key))["result"] == {"sent_to": "cy@example.org"}

            files.hold.touch()  # A wakes up: its call returns into a run it no longer owns
            manager = first.plugins["agents.AgentRunsPlugin"].instance.manager  # type: ignore[attr-defined]
            await until(lambda: run_id not in manager.live, "A stopped running the run")
            assert await first.container.get("store").get(key) is None  # A recorded nothing
            assert keys_log.read_text().splitlines() == [key, key]  # one key for both attempts
            assert files.sent() == ["cy@example.org", "cy@example.org"]  # the service de-dups by key
            assert len(first.container.get_raw_tools()["llm"].requests) == 1  # type: ignore[attr-defined]
            final = (await b.get(f"/agents/runs/{run_id}")).json()
            assert final["status"] == "completed" and final["output"] == "Cy was emailed."


async def test_at_shutdown_a_tool_call_in_flight_may_finish_and_its_result_is_checkpointed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    monkeypatch.setenv("HOLD_AFTER_SEND", str(files.hold))
    monkeypatch.setenv("AGENTS_TOOL_GRACE_SECONDS", "10")
    root = agents_root(tmp_path, example=False, plugins={"ops.py": OPS_AGENT_PLUGIN})
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "send_email", to="di@example.org")]})
    )
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "email Di"})).json()["id"]
        await wait_for_line(files.sent_log)  # inside send_email (side-effecting), holding
        manager = kernel.plugins["agents.AgentRunsPlugin"].instance.manager  # type: ignore[attr-defined]
        closing = asyncio.create_task(manager.close())  # what SIGTERM leads to
        await until(lambda: manager._closing.is_set(), "the manager started closing")
        assert not closing.done()  # it waits for the call in flight instead of cancelling it
        files.hold.touch()  # the call finishes within the grace
        await asyncio.wait_for(closing, 10)
        latest = await kernel.container.get("checkpoint").latest(run_id)
        assert latest.state["pending"] is None
        tool_message = [m for m in latest.state["transcript"] if m["role"] == "tool"]
        assert len(tool_message) == 1 and "di@example.org" in tool_message[0]["content"]
        assert latest.status == "running"  # handed over to the next process, result and all


async def test_a_killed_process_restarted_on_its_host_reclaims_its_runs_without_waiting_for_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    from tests.domains.agents.test_restart import FIRST_PROCESS, SECOND_PROCESS, Process

    root = agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "logger"),
        example=False,
        plugins={"ops_agent.py": OPS_AGENT_PLUGIN},
    )
    monkeypatch.setenv("FAKE_LLM_SCRIPT", FIRST_PROCESS)
    monkeypatch.setenv("AGENT_RUN_LEASE_SECONDS", "600")  # far longer than this test may take
    first = Process(root)
    try:
        url = await first.start()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            run_id = (await client.post("/agents/ops/runs", json={"input": "email Ada, then wait"})).json()[
                "id"
            ]
            await wait_for_line(files.gate_log)
    finally:
        await first.kill()  # SIGKILL: its lease stays, 600 s ahead

    files.gate.touch()
    monkeypatch.setenv("FAKE_LLM_SCRIPT", SECOND_PROCESS)
    second = Process(root)
    try:
        url = await second.start()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = await wait_for_status(client, run_id, ["completed", "failed"])
            assert body["status"] == "completed", (body, second.lines)
            assert body["resumed"] == 1
        assert any("is gone; reclaiming it now" in line for line in second.lines)
    finally:
        await second.kill()
    assert files.sent() == ["ada@example.org"]


class SharedIndex:
    """The run index as several processes see it: one table, each process its own owner id."""

    def __init__(self, rows: dict[str, str | None], owner: str) -> None:
        self.rows, self.owner = rows, owner

    async def orphaned_here(self) -> list[tuple[str, str, str]]:
        return []

    async def claimable(self) -> list[tuple[str, str]]:
        return [(run_id, "ops") for run_id, owner in sorted(self.rows.items()) if owner is None]

    async def claim(self, run_id: str, *, from_owner: str | None = None) -> bool:
        if self.rows.get(run_id, "gone") is not None:
            return False
        self.rows[run_id] = self.owner
        return True

    async def set_status(self, run_id: str, status: str) -> None:
        return None


async def test_a_takeover_spreads_the_runs_of_a_dead_process_over_the_survivors() -> None:
    from core.agents import Agent
    from core.context import bound, current_plugin_var
    from core.runs.catalog import AgentCatalog
    from core.runs.execution import RunServices
    from core.runs.manager import RunManager
    from core.runtime import NoopTrace
    from core.state.checkpoints import InMemoryCheckpointStore
    from core.testing import FakeLLM

    catalog = AgentCatalog()
    with bound(current_plugin_var, "agents.Ops"):
        catalog.declare(Agent("ops", "m"), llm=FakeLLM("hi"))
    rows: dict[str, str | None] = {f"run-{n:02d}": None for n in range(16)}  # a dead process's runs
    services = RunServices(checkpoint=InMemoryCheckpointStore(), store=None, trace=NoopTrace())
    survivors = [
        RunManager(catalog=catalog, index=SharedIndex(rows, name), services=services)  # type: ignore[arg-type]
        for name in ("a", "b")
    ]
    for _ in range(10):  # lease ticks, one survivor after the other
        for survivor in survivors:
            await survivor.resume_in_flight(any_agent=False)
    counts = {name: list(rows.values()).count(name) for name in ("a", "b")}
    assert sum(counts.values()) == 16  # every run taken over, once
    assert min(counts.values()) >= 4  # and not all by whoever ticked first (that got all 16 before)


async def test_finished_runs_are_deleted_once_past_their_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    monkeypatch.setenv("AGENTS_RUN_RETENTION_SECONDS", "50")
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "Done."}, {"content": "Done again."}))
    root = agents_root(tmp_path, example=False, plugins={"ops.py": OPS_AGENT_PLUGIN})
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        old, recent = [
            (await client.post("/agents/ops/runs", json={"input": text})).json()["id"] for text in ("a", "b")
        ]
        for run_id in (old, recent):
            assert (await wait_for_status(client, run_id, ["completed", "failed"]))["status"] == "completed"
        db = kernel.container.get("db")
        await until_row_ended(db, old)
        await db.execute("UPDATE agent_runs SET updated_at = updated_at - 100 WHERE id = $1", [old])
        manager = kernel.plugins["agents.AgentRunsPlugin"].instance.manager  # type: ignore[attr-defined]
        assert await manager.purge_finished() == 1
        assert (await client.get(f"/agents/runs/{old}")).status_code == 404
        assert await kernel.container.get("checkpoint").latest(old) is None
        assert (await client.get(f"/agents/runs/{recent}")).json()["status"] == "completed"
        assert await manager.purge_finished() == 0


async def until_row_ended(db: Any, run_id: str) -> None:
    """The index row is updated just after the final checkpoint: wait (bounded) for it."""
    for _ in range(500):
        if await db.scalar("SELECT status FROM agent_runs WHERE id = $1", [run_id]) != "running":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} still indexed as running")


async def test_a_follower_on_the_executing_process_gets_final_when_another_process_cancels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    from tests.domains.agents.agents_kit import collect_events

    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/shared.db")
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "wait_for_gate")]}, {"content": "no"})
    )
    first_root = agents_root(tmp_path, example=False, plugins={"ops.py": OPS_AGENT_PLUGIN}, name="a")
    second_root = agents_root(tmp_path, example=False, name="b")  # serves the API, cannot run 'ops'
    async with serving(first_root) as (first, first_url), httpx.AsyncClient(base_url=first_url) as a:
        run_id = (await a.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
        seen = await collect_events(a, run_id, until="tool_call")
        follower = asyncio.create_task(collect_events(a, run_id, last_event_id=seen[-1]["id"]))
        async with serving(second_root) as (_, second_url), httpx.AsyncClient(base_url=second_url) as b:
            answer = await b.post(f"/agents/runs/{run_id}/cancel")
            assert answer.status_code == 202 and answer.json()["status"] == "cancelled"
            files.gate.touch()  # A's call returns; A publishes its result, then its save is refused
            rest = await asyncio.wait_for(follower, 30)
        assert rest[-1]["event"] == "final"
        assert rest[-1]["data"]["status"] == "cancelled"
