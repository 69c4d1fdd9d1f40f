"""Project roots, test plugins and a scripted model for the agents domain's service tests.

:func:`agents_root` builds a temporary project root (``tests.kit.make_root``: the project's own
tools as linked folders) with the agents domain rebuilt from links, so a test can drop its own
plugins *into* the agents domain (``domains/agents/plugins/``) next to the real runs API.
``migrations/agents`` is linked, so the run index and the example's products exist.

The ``llm`` tool of a root is either the real one (pointed at a local OpenAI-compatible server by
the test) or :data:`SCRIPTED_LLM_TOOL`, a tool named ``llm`` wrapping ``core.testing.FakeLLM``
with the turns in ``FAKE_LLM_SCRIPT`` (JSON). A scripted model that runs out of turns raises a
``RuntimeError`` (the run then fails saying so) instead of FakeLLM's ``BaseException``, which
would only kill the run's task.

Waits here are bounded at 20 s (runs go through a real HTTP server, database and model loop).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.kit import PROJECT, make_root, sse_events, until, write

WAIT_LIMIT = 20.0

SCRIPTED_LLM_TOOL = """
    import dataclasses
    import json
    import os

    from core import BaseTool
    from core.contracts.types import ToolCall, Usage, assemble_deltas
    from core.testing import FakeLLM, ScriptExhausted, Turn


    class ScriptedLlm(BaseTool):
        name = "llm"
        default_model = "fake-model"

        async def setup(self):
            turns = []
            for turn in json.loads(os.environ.get("FAKE_LLM_SCRIPT", "[]")):
                calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in turn.get("tool_calls", [])]
                usage = Usage(**turn["usage"]) if "usage" in turn else None
                turns.append(Turn(turn.get("content", ""), calls, usage))
            self.fake = FakeLLM.script(turns, chunk_size=int(os.environ.get("FAKE_LLM_CHUNK", "4")))
            self.requests = []

        async def stream(self, *, messages, model, tools=None, response_format=None, temperature=None,
                         max_tokens=None, cache_hint=None):
            self.requests.append(list(messages))
            no_usage = os.environ.get("FAKE_LLM_NO_USAGE") == "1"  # a server that reports none
            try:
                async for delta in self.fake.stream(messages=messages, model=model, tools=tools):
                    yield dataclasses.replace(delta, usage=None) if no_usage else delta
            except ScriptExhausted as exc:
                raise RuntimeError(str(exc)) from None

        async def chat(self, **kwargs):
            return assemble_deltas([d async for d in self.stream(**kwargs)])

        async def complete(self, *, system, user, model, **settings):
            return await self.fake.complete(system=system, user=user, model=model)
"""

OPS_AGENT_PLUGIN = """
    import asyncio
    import os
    from pathlib import Path

    from core import BasePlugin
    from core.agents import Agent, ReActCognition
    from core.contracts.types import ToolSchema
    from core.runs import catalog_for


    async def wait_for(path):
        while not path.exists():
            await asyncio.sleep(0.01)


    class SendEmail:
        name = "send_email"
        side_effecting = True
        schema = ToolSchema("send_email", "Send an email", {"type": "object"})

        async def run(self, args, ctx):
            with open(os.environ["SENT_LOG"], "a") as log:
                log.write(args["to"] + "\\n")
            hold = os.environ.get("HOLD_AFTER_SEND")
            if hold:
                await wait_for(Path(hold))
            return {"sent_to": args["to"]}


    class WaitForGate:
        name = "wait_for_gate"
        side_effecting = False
        schema = ToolSchema("wait_for_gate", "Wait until the gate opens", {"type": "object"})

        async def run(self, args, ctx):
            with open(os.environ["GATE_LOG"], "a") as log:
                log.write("entered\\n")
            await wait_for(Path(os.environ["GATE_FILE"]))
            return "the gate is open"


    class OpsAgentPlugin(BasePlugin):
        def __init__(self, llm, container):
            self.llm = llm
            self.catalog = catalog_for(container)

        async def on_boot(self):
            tools = [SendEmail(), WaitForGate()]
            agent = Agent("ops", self.llm.default_model, ReActCognition(tools), system="You run errands.")
            self.catalog.declare(agent, llm=self.llm, description="errands with side effects")

        async def on_shutdown(self):
            self.catalog.withdraw("ops")
"""

DOMAIN_PARTS = ("runs", "models")


def agents_root(
    tmp_path: Path,
    *,
    tools: Iterable[str] = ("http", "db", "checkpoint", "store"),
    scripted_llm: bool = True,
    example: bool = True,
    plugins: Mapping[str, str] | None = None,
    domains: Iterable[str] = (),
    name: str = "root",
) -> Path:
    """A root with the agents domain (runs API, optionally the example) and ``plugins`` added to it."""
    root = make_root(tmp_path, tools=tools, domains=domains, name=name)
    if scripted_llm:
        write(root, "tools/scripted_llm/scripted_llm_tool.py", SCRIPTED_LLM_TOOL)
    domain = root / "domains" / "agents"
    (domain / "plugins").mkdir(parents=True)
    for part in DOMAIN_PARTS:
        (domain / part).symlink_to(PROJECT / "domains" / "agents" / part, target_is_directory=True)
    wanted = ["runs_api.py", *(["product_assistant.py"] if example else [])]
    for plugin in wanted:
        (domain / "plugins" / plugin).symlink_to(PROJECT / "domains" / "agents" / "plugins" / plugin)
    for file_name, source in (plugins or {}).items():
        write(root, f"domains/agents/plugins/{file_name}", source)
    (root / "migrations").mkdir()
    (root / "migrations" / "agents").symlink_to(PROJECT / "migrations" / "agents", target_is_directory=True)
    return root


def script(*turns: Mapping[str, Any]) -> str:
    """``FAKE_LLM_SCRIPT`` for these turns: ``{"content": ..., "tool_calls": [call(...), ...]}``."""
    return json.dumps(list(turns))


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


async def collect_events(
    client: httpx.AsyncClient,
    run_id: str,
    *,
    last_event_id: str | None = None,
    until: str = "final",
    headers: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The run's events (from ``last_event_id`` on) up to and including the first of kind ``until``."""
    headers = {**(headers or {}), **({"Last-Event-ID": last_event_id} if last_event_id else {})}
    collected: list[dict[str, Any]] = []
    async with asyncio.timeout(WAIT_LIMIT):
        async with client.stream("GET", f"/agents/runs/{run_id}/events", headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for event in sse_events(response):
                collected.append(event)
                if event["event"] == until:
                    break
    return collected


async def wait_for_status(client: httpx.AsyncClient, run_id: str, statuses: Sequence[str]) -> dict[str, Any]:
    """Poll the run (with a bound) until its status is one of ``statuses``; its last body."""
    body: dict[str, Any] = {}

    async def reached() -> bool:
        nonlocal body
        body = (await client.get(f"/agents/runs/{run_id}")).json()
        return body["status"] in statuses

    await until(reached, f"run {run_id} is one of {list(statuses)}", limit=WAIT_LIMIT)
    return body


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def wait_for_line(path: Path, count: int = 1) -> None:
    """Wait (with a bound) until ``path`` has at least ``count`` lines."""
    await until(lambda: line_count(path) >= count, f"{path.name} has {count} line(s)", limit=WAIT_LIMIT)
