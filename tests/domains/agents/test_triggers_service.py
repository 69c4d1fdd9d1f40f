"""Triggered runs in a booted service: an agent declared with an event trigger starts one ordinary
run per published event, listed by ``GET /agents/runs`` like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.domains.agents.agents_kit import agents_root, script
from tests.kit import PROJECT, serving, until

TRIAGE_PLUGIN = """
from core import BasePlugin
from core.agents import Agent, ReActCognition
from core.runs import catalog_for
from core.runs import triggers_for


class Triage(BasePlugin):
    def __init__(self, llm, container):
        self.llm = llm
        self.catalog = catalog_for(container)
        self.triggers = triggers_for(container)

    def on_boot(self):
        self.catalog.declare(Agent("triage", "fake-model", ReActCognition([])), llm=self.llm)
        self.triggers.on_event("triage", "ticket.created", input="Triage: {payload[title]}", max_calls=2)

    def on_shutdown(self):
        self.triggers.withdraw_owner()
        self.catalog.withdraw("triage")
"""


async def test_each_published_event_starts_one_listed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "triaged"}, {"content": "triaged again"}))
    monkeypatch.setenv("SCHEDULER_URL", "sqlite:///data/scheduler.db")
    monkeypatch.setenv("SCHEDULER_POLL_SECONDS", "0.05")
    root = agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "event_bus", "scheduler"),
        example=False,
        plugins={"triage.py": TRIAGE_PLUGIN},
    )
    (root / "domains/agents/plugins/agent_triggers.py").symlink_to(
        PROJECT / "domains/agents/plugins/agent_triggers.py"
    )
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        assert kernel.registry.plugin_status("agents.AgentTriggersPlugin") is not None
        bus = kernel.container.get("event_bus")
        await bus.publish("ticket.created", {"title": "printer on fire"})
        await bus.publish("ticket.created", {"title": "no coffee"})

        async def runs() -> list[dict[str, Any]]:
            listed: list[dict[str, Any]] = (
                await client.get("/agents/runs", params={"agent": "triage"})
            ).json()["runs"]
            return listed

        async def two_runs_ended() -> bool:
            listed = await runs()
            return len(listed) == 2 and all(r["status"] != "running" for r in listed)

        await until(two_runs_ended, "one run per event, each ending")
        inputs = set()
        for run in await runs():
            body = (await client.get(f"/agents/runs/{run['id']}")).json()
            inputs.add(body["input"])
        assert inputs == {"Triage: printer on fire", "Triage: no coffee"}
