"""Runs survive a restart: a run in flight when the process stopped is resumed from its last
checkpoint by the next process on the same database, never repeating a side-effecting call."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

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
from tests.kit import PROJECT, serving, started_tool
from tools.store.store_tool import StoreTool

FIRST_PROCESS = script(
    {"content": "Sending.", "tool_calls": [call("c1", "send_email", to="ada@example.org")]},
    {"content": "Waiting.", "tool_calls": [call("c2", "wait_for_gate")]},
)
SECOND_PROCESS = script({"content": "All done."})


def ops_root(tmp_path: Path) -> Path:
    return agents_root(tmp_path, example=False, plugins={"ops_agent.py": OPS_AGENT_PLUGIN})


def model_requests(kernel: Kernel) -> list[list[Any]]:
    return kernel.container.get_raw_tools()["llm"].requests  # type: ignore[attr-defined, no-any-return]


async def test_a_run_blocked_mid_way_resumes_after_a_restart_and_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    root = ops_root(tmp_path)
    monkeypatch.setenv("FAKE_LLM_SCRIPT", FIRST_PROCESS)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "email Ada, then wait"})).json()["id"]
        await wait_for_line(files.gate_log)  # the run is inside wait_for_gate, which never returns here
        seen = await collect_events(client, run_id, until="tool_call")
        seen += await collect_events(client, run_id, last_event_id=seen[-1]["id"], until="tool_call")
        assert [e["data"]["tool_call"]["name"] for e in seen if e["event"] == "tool_call"] == [
            "send_email",
            "wait_for_gate",
        ]
        before = (await client.get(f"/agents/runs/{run_id}")).json()
        assert before["status"] == "running" and before["model_calls"] == 2
    assert files.sent() == ["ada@example.org"]

    files.gate.touch()
    monkeypatch.setenv("FAKE_LLM_SCRIPT", SECOND_PROCESS)
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed", body
        assert body["output"] == "All done." and body["resumed"] == 1 and body["model_calls"] == 3
        assert files.sent() == ["ada@example.org"]  # the side-effecting call was not repeated
        assert files.gate_entries() == 2  # the read-only call that was cut off ran again
        (request,) = model_requests(kernel)  # one model call in this process: the final answer
        assert [(m.role, m.tool_call_id) for m in request[-4:]] == [
            ("assistant", None),
            ("tool", "c1"),
            ("assistant", None),
            ("tool", "c2"),
        ]
        assert request[-1].content == "the gate is open"

        rest = await collect_events(client, run_id, last_event_id=seen[-1]["id"])
        assert rest[0]["event"] == "resumed" and rest[0]["id"].startswith("1-")
        assert [e["event"] for e in rest[1:]] == ["tool_call", "tool_result", *["message_delta"] * 3, "final"]
        everything = await collect_events(client, run_id)
        assert [e["id"] for e in everything[: len(seen)]] == [e["id"] for e in seen]
        assert everything[-1]["data"]["output"] == "All done."
        versions = (await client.get(f"/agents/runs/{run_id}")).json()["versions"]
        assert versions == sorted(set(versions)) and len(versions) >= 6


async def test_a_side_effecting_call_cut_off_mid_way_is_not_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    root = ops_root(tmp_path)
    monkeypatch.setenv("HOLD_AFTER_SEND", str(files.hold))  # send_email sends, then hangs
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "send_email", to="bo@example.org")]})
    )
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "email Bo"})).json()["id"]
        await wait_for_line(files.sent_log)
    # The process stopped inside send_email: it may or may not have sent (it did).
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "I could not confirm the email was sent."}))
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed", body
        assert files.sent() == ["bo@example.org"]
        (request,) = model_requests(kernel)
        assert request[-1].tool_call_id == "c1"
        assert request[-1].content.startswith(
            "error: this call was in progress when the run's process stopped"
        )


async def test_a_result_recorded_before_the_stop_is_used_instead_of_calling_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    monkeypatch.setenv("STORE_URL", "sqlite:///data/store.db")  # a store that survives the restart
    root = ops_root(tmp_path)
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"tool_calls": [call("c9", "wait_for_gate")]}))
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
        latest = await kernel.container.get("checkpoint").latest(run_id)
        key = latest.state["pending"]["key"]
    assert key == f"agents:tool:{run_id}:2:c9"
    # As if the call had returned and been recorded just before the process died.
    async with started_tool(StoreTool, root) as store:
        await store.set(key, {"result": "recorded earlier", "text": "recorded earlier"})
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "Done."}))
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed", body
        assert files.gate_entries() == 1  # not called again (the gate never opened)
        (request,) = model_requests(kernel)
        assert request[-1].content == "recorded earlier"
        events = await collect_events(client, run_id)
        results = [e["data"]["result"] for e in events if e["event"] == "tool_result"]
        assert results == ["recorded earlier"]


async def test_a_run_whose_agent_is_gone_is_failed_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    root = ops_root(tmp_path)
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"tool_calls": [call("c1", "wait_for_gate")]}))
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/ops/runs", json={"input": "wait"})).json()["id"]
        await wait_for_line(files.gate_log)
    (root / "domains" / "agents" / "plugins" / "ops_agent.py").unlink()
    monkeypatch.setenv("AGENTS_RESUME_WAIT_SECONDS", "0.2")
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        body = await wait_for_status(client, run_id, ["failed"])
        assert body["error"] == "agent 'ops' is not declared in this service, so the run cannot continue"
        events = await collect_events(client, run_id)
        assert events[-1]["event"] == "final" and events[-1]["data"]["status"] == "failed"


RUN_SCRIPT = """
import sys
sys.path.insert(0, {project!r})
from core import Kernel
sys.exit(Kernel({root!r}).run())
"""


class Process:
    """A Keel process on ``root``, its output read until the line saying where it serves."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []

    async def start(self) -> str:
        script = self.root / "run.py"
        script.write_text(RUN_SCRIPT.format(project=str(PROJECT), root=str(self.root)))
        env = {**os.environ, "PORT": "0", "HOST": "127.0.0.1", "LOG_LEVEL": "INFO"}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            env=env,
            cwd=self.root,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert self.process.stdout is not None
        async with asyncio.timeout(30):
            while raw := await self.process.stdout.readline():
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                found = re.search(r"serving on (http://\S+)", line)
                if found:
                    self._drain = asyncio.create_task(self._read_rest())
                    return found.group(1)
        raise AssertionError("the process never served:\n" + "\n".join(self.lines))

    async def _read_rest(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()  # SIGKILL: no shutdown hook, no finally block runs
            await self.process.wait()


async def test_a_killed_process_is_restarted_and_the_run_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    root = agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "logger"),
        example=False,
        plugins={"ops_agent.py": OPS_AGENT_PLUGIN},
    )
    monkeypatch.setenv("FAKE_LLM_SCRIPT", FIRST_PROCESS)
    monkeypatch.setenv("AGENT_RUN_LEASE_SECONDS", "1")  # the killed process's lease lapses soon
    first = Process(root)
    try:
        url = await first.start()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            run_id = (await client.post("/agents/ops/runs", json={"input": "email Ada, then wait"})).json()[
                "id"
            ]
            await wait_for_line(files.gate_log)
    finally:
        await first.kill()
    assert files.sent() == ["ada@example.org"]

    files.gate.touch()
    monkeypatch.setenv("FAKE_LLM_SCRIPT", SECOND_PROCESS)
    second = Process(root)
    try:
        url = await second.start()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = await wait_for_status(client, run_id, ["completed", "failed"])
            assert body["status"] == "completed", (body, second.lines)
            assert body["output"] == "All done." and body["resumed"] == 1
            events = await collect_events(client, run_id)
            assert [e["event"] for e in events].count("final") == 1
    finally:
        await second.kill()
    assert files.sent() == ["ada@example.org"]
