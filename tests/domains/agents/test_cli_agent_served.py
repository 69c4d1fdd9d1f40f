"""An agent whose cognition is a coding-agent CLI, served over HTTP and resumed after a restart.

The ``coding_cli`` tool launches ``CLAUDE_CLI_BIN`` as a real process; here that is a stand-in
executable speaking claude's stream-JSON protocol (no binary, no key, no money). The first process
blocks part-way until a gate file exists; the first kernel stops while it waits, and the next kernel
on the same database resumes the run, which spawns the CLI again and completes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from tests.domains.agents.agents_kit import agents_root, collect_events, wait_for_line, wait_for_status
from tests.domains.agents.conftest import Files
from tests.kit import serving

CODER_PLUGIN = """
    from core import BasePlugin
    from core.agents import Agent
    from core.runs import catalog_for


    class CoderPlugin(BasePlugin):
        def __init__(self, coding_cli, llm, container):
            self.coding_cli = coding_cli
            self.llm = llm
            self.catalog = catalog_for(container)

        async def on_boot(self):
            cognition = self.coding_cli.claude(permission_mode="acceptEdits")
            agent = Agent("coder", "claude-sonnet-4-5", cognition, system="You edit code.")
            self.catalog.declare(agent, llm=self.llm, description="claude, as a CLI")

        async def on_shutdown(self):
            self.catalog.withdraw("coder")
"""

STAND_IN = """#!{python}
import json, os, sys, time
with open(os.environ["SPAWN_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
def emit(event):
    print(json.dumps(event), flush=True)
emit({{"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5"}})
for line in sys.stdin:
    task = json.loads(line)["message"]["content"][0]["text"]
    usage = {{"input_tokens": 100, "output_tokens": 20}}
    message = {{"id": "m1", "content": [{{"type": "text", "text": "Working on: " + task}}], "usage": usage}}
    emit({{"type": "assistant", "message": message}})
    with open(os.environ["GATE_LOG"], "a") as log:
        log.write("entered\\n")
    while not os.path.exists(os.environ["GATE_FILE"]):
        time.sleep(0.02)
    emit({{"type": "result", "subtype": "success", "result": "Added GET /health.",
          "total_cost_usd": 0.0125, "usage": usage, "session_id": "s-1"}})
"""


@pytest.fixture
def claude_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    executable = tmp_path / "claude"
    executable.write_text(STAND_IN.format(python=sys.executable))
    executable.chmod(0o755)
    monkeypatch.setenv("CLAUDE_CLI_BIN", str(executable))
    monkeypatch.setenv("SPAWN_LOG", str(tmp_path / "spawns.log"))
    return tmp_path / "spawns.log"


def spawned(log: Path) -> list[list[str]]:
    """The argv of each launch of the stand-in, in order."""
    return [json.loads(line) for line in log.read_text().splitlines()]


def served_root(tmp_path: Path) -> Path:
    return agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "coding_cli"),
        example=False,
        plugins={"coder.py": CODER_PLUGIN},
    )


async def test_a_cli_agent_runs_over_http(tmp_path: Path, files: Files, claude_bin: Path) -> None:
    files.gate.touch()
    root = served_root(tmp_path)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        listed = {a["name"]: a for a in (await client.get("/agents")).json()["agents"]}
        assert listed["coder"]["cognition"] == "ClaudeCliCognition"
        started = await client.post("/agents/coder/runs", json={"input": "add a health endpoint"})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed", body
        assert body["output"] == "Added GET /health." and body["cost_usd"] == "0.012500"
        events = [e["event"] for e in await collect_events(client, run_id)]
        assert events[-1] == "final" and "message_delta" in events
    (argv,) = spawned(claude_bin)
    assert argv[:2] == ["-p", "--input-format"] and "--append-system-prompt" in argv


async def test_a_cli_run_cut_off_by_a_restart_is_resumed_and_completes(
    tmp_path: Path, files: Files, claude_bin: Path
) -> None:
    root = served_root(tmp_path)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        started = await client.post("/agents/coder/runs", json={"input": "add a health endpoint"})
        run_id = started.json()["id"]
        await wait_for_line(files.gate_log)  # the CLI is part-way through its turn, blocked on the gate
        assert (await client.get(f"/agents/runs/{run_id}")).json()["status"] == "running"

    files.gate.touch()
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed", body
        assert body["output"] == "Added GET /health." and body["resumed"] == 1
    assert len(spawned(claude_bin)) == 2  # the resumed run spawned the CLI again
