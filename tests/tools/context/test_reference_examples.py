"""The reference's agent example and test examples work as written (read from docs/plugin-api.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.domains.agents.agents_kit import agents_root, call, script, wait_for_status
from tests.kit import serving, write
from tests.tools.context.checkout_kit import clean_checkout
from tests.tools.context.test_reference_guide import skeleton, snippets

AGENT_FILE = "domains/agents/plugins/clock_agent.py"
NOTES_TEST = "tests/domains/notes/test_notes.py"
AGENT_TEST = "tests/domains/agents/test_clock_agent.py"
UNSET = ("AGENTS_", "LLM_", "STORE_", "CHECKPOINT_", "DATABASE_URL", "EVENT_BUS_URL", "FAKE_LLM_", "OTEL_")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(UNSET)]:
        monkeypatch.delenv(name)


def test_the_guides_test_examples_pass_as_written_in_a_fresh_clone(tmp_path: Path, clean_env: None) -> None:
    checkout = clean_checkout(tmp_path)
    found = snippets()
    for path, code in {**skeleton(), AGENT_FILE: found[AGENT_FILE]}.items():
        write(checkout, path, code)
    for path in (NOTES_TEST, AGENT_TEST):
        write(checkout, path, found[path])
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", NOTES_TEST, AGENT_TEST],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout, run.stdout


async def test_the_agent_example_is_declared_served_and_calls_its_tool(
    tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT", script({"tool_calls": [call("call-1", "now")]}, {"content": "It is noon."})
    )
    root = agents_root(tmp_path, example=False, plugins={"clock_agent.py": snippets()[AGENT_FILE]})
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        assert kernel.registry.get_system_dump()["plugins"]["agents.ClockAgent"]["status"] == "READY"
        agents = {a["name"]: a for a in (await client.get("/agents")).json()["agents"]}
        assert (agents["clock"]["tools"], agents["clock"]["description"]) == (["now"], "Tells the time")

        started = await client.post("/agents/clock/runs", json={"input": "What time is it?"})
        assert started.status_code == 202, started.text
        run = await wait_for_status(client, started.json()["id"], ["completed", "failed"])
        assert (run["status"], run["output"]) == ("completed", "It is noon."), run
        llm: Any = kernel.container.get_raw_tools()["llm"]  # the root's scripted llm tool: not importable
        tool_results = [m for m in llm.requests[-1] if m.role == "tool"]
        assert len(tool_results) == 1 and tool_results[0].content.startswith("20"), "now() ran: an ISO time"
