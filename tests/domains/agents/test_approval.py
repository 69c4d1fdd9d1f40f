"""Human approval of tool calls: a run suspends on a call that needs approval, says what it asks,
and continues when its owner or an admin decides — also after its process was killed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import Kernel
from tests.domains.agents.agents_kit import agents_root, call, collect_events, script, wait_for_status
from tests.domains.agents.conftest import Files
from tests.domains.agents.test_restart import Process
from tests.kit import serving, until

PAYMENTS_PLUGIN = """
    import os

    from core import BasePlugin
    from core.agents import Agent, ReActCognition
    from core.contracts.types import ToolSchema
    from core.runs import catalog_for


    def large(arguments):
        amount = arguments.get("amount", 0)
        return f"pay {amount} euros to {arguments.get('to')}?" if amount > 100 else False


    class Pay:
        name = "pay"
        side_effecting = True
        requires_approval = staticmethod(large)
        schema = ToolSchema("pay", "Pay someone", {"type": "object"})

        async def run(self, args, ctx):
            with open(os.environ["SENT_LOG"], "a") as log:
                log.write(f"{args['to']} {args['amount']}\\n")
            return {"paid": args["amount"], "to": args["to"]}


    class PaymentsPlugin(BasePlugin):
        def __init__(self, llm, container):
            self.llm = llm
            self.catalog = catalog_for(container)

        async def on_boot(self):
            agent = Agent("payments", self.llm.default_model, ReActCognition([Pay()]), system="You pay.")
            self.catalog.declare(agent, llm=self.llm, description="pays people")

        async def on_shutdown(self):
            self.catalog.withdraw("payments")
"""

PAY = script(
    {"content": "Paying.", "tool_calls": [call("p1", "pay", to="ada", amount=500)]},
    {"content": "Done."},
)


def payments_root(tmp_path: Path, *, tools: tuple[str, ...] = ("http", "db", "checkpoint", "store")) -> Path:
    return agents_root(tmp_path, tools=tools, example=False, plugins={"payments.py": PAYMENTS_PLUGIN})


@pytest.fixture
async def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Kernel, Any]]:
    monkeypatch.setenv("FAKE_LLM_SCRIPT", PAY)
    monkeypatch.setenv("AGENTS_EVENTS_POLL_SECONDS", "0.05")
    async with serving(payments_root(tmp_path)) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            yield kernel, client


async def suspended(client: httpx.AsyncClient, task: str = "pay ada 500") -> tuple[str, dict[str, Any]]:
    run_id = (await client.post("/agents/payments/runs", json={"input": task})).json()["id"]
    events = await collect_events(client, run_id, until="interrupt")
    body = await wait_for_status(client, run_id, ["suspended"])
    return run_id, {"interrupt": events[-1]["data"], "run": body}


async def test_a_run_suspends_and_pays_with_the_edited_amount_once_approved(
    service: tuple[Kernel, Any], files: Files
) -> None:
    _, client = service
    run_id, seen = await suspended(client)
    asked = seen["interrupt"]
    assert asked["kind"] == "approval" and asked["question"] == "pay 500 euros to ada?"
    assert asked["tool_call"]["arguments"] == {"to": "ada", "amount": 500}
    assert seen["run"]["awaiting_approval"]["question"] == "pay 500 euros to ada?"
    assert files.sent() == []  # nothing paid while waiting
    (listed,) = (await client.get("/agents/approvals")).json()["runs"]
    assert (listed["id"], listed["question"]) == (run_id, "pay 500 euros to ada?")

    early = await client.post(f"/agents/runs/{run_id}/approval", json={"approve": "maybe"})
    assert early.status_code == 422
    approved = await client.post(
        f"/agents/runs/{run_id}/approval", json={"approve": True, "arguments": {"to": "ada", "amount": 450}}
    )
    assert approved.status_code == 202, approved.text
    events = await collect_events(client, run_id)
    kinds = [e["event"] for e in events]
    assert kinds.index("interrupt") < kinds.index("approval") < kinds.index("tool_result")
    assert events[-1]["data"]["status"] == "completed"
    assert files.sent() == ["ada 450"]
    assert (await client.get("/agents/approvals")).json()["runs"] == []
    again = await client.post(f"/agents/runs/{run_id}/approval", json={"approve": True})
    assert again.status_code == 409


async def test_a_denied_call_is_not_run_and_the_model_is_told(
    service: tuple[Kernel, Any], files: Files
) -> None:
    kernel, client = service
    run_id, _ = await suspended(client)
    denied = await client.post(
        f"/agents/runs/{run_id}/approval", json={"approve": False, "reason": "too much"}
    )
    assert denied.status_code == 202
    events = await collect_events(client, run_id)
    (result,) = [e["data"] for e in events if e["event"] == "tool_result"]
    assert result["result"] == "denied: a human did not approve this call (too much)"
    assert events[-1]["data"]["status"] == "completed"
    assert files.sent() == []
    llm: Any = kernel.container.get_raw_tools()["llm"]  # the root's ScriptedLlm: written, not importable
    told = llm.requests[-1][-1]
    assert "denied" in told.content


async def test_no_answer_in_time_denies_and_cancelling_a_waiting_run_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    monkeypatch.setenv("FAKE_LLM_SCRIPT", PAY)
    monkeypatch.setenv("AGENTS_EVENTS_POLL_SECONDS", "0.05")
    monkeypatch.setenv("AGENTS_APPROVAL_TIMEOUT_SECONDS", "0.3")
    root = payments_root(tmp_path)
    async with serving(root) as (_, url), httpx.AsyncClient(base_url=url) as client:
        run_id = (await client.post("/agents/payments/runs", json={"input": "pay"})).json()["id"]
        events = await collect_events(client, run_id)
        (decision,) = [e["data"] for e in events if e["event"] == "approval"]
        assert decision["approved"] is False and decision["by"] == "timeout"
        assert events[-1]["data"]["status"] == "completed"
    assert files.sent() == []

    monkeypatch.setenv("AGENTS_APPROVAL_TIMEOUT_SECONDS", "60")
    async with serving(root) as (_, url), httpx.AsyncClient(base_url=url) as client:
        run_id, _ = await suspended(client)  # a fresh kernel: its model starts the script again
        assert (await client.post(f"/agents/runs/{run_id}/cancel")).status_code == 202
        body = await wait_for_status(client, run_id, ["cancelled"])
        assert body["status"] == "cancelled"
        late = await client.post(f"/agents/runs/{run_id}/approval", json={"approve": True})
        assert late.status_code == 409
    assert files.sent() == []


async def test_a_run_waiting_for_approval_survives_a_sigkill_and_pays_once_on_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: Files
) -> None:
    root = payments_root(tmp_path, tools=("http", "db", "checkpoint", "store", "logger"))
    monkeypatch.setenv("STORE_URL", "sqlite:///data/store.db")  # decisions and results outlive the process
    monkeypatch.setenv("AGENT_RUN_LEASE_SECONDS", "1")
    monkeypatch.setenv("AGENTS_EVENTS_POLL_SECONDS", "0.1")
    monkeypatch.setenv("FAKE_LLM_SCRIPT", script(PAY_FIRST))
    first = Process(root)
    try:
        url = await first.start()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            run_id, seen = await suspended(client)
            assert seen["run"]["status"] == "suspended"
    finally:
        await first.kill()

    monkeypatch.setenv("FAKE_LLM_SCRIPT", script({"content": "Done."}))
    second = Process(root)
    try:
        url = await second.start()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = await wait_for_status(client, run_id, ["suspended"])
            assert body["awaiting_approval"]["question"] == "pay 500 euros to ada?"

            async def taken_over() -> bool:
                resumed: int = (await client.get(f"/agents/runs/{run_id}")).json()["resumed"]
                return resumed == 1

            await until(taken_over, "the second process took the run over", limit=20)
            approved = await client.post(f"/agents/runs/{run_id}/approval", json={"approve": True})
            assert approved.status_code == 202, approved.text
            body = await wait_for_status(client, run_id, ["completed", "failed"])
            assert body["status"] == "completed", (body, second.lines)
            events = await collect_events(client, run_id)
            assert [e["event"] for e in events].count("final") == 1
    finally:
        await second.kill()
    assert files.sent() == ["ada 500"]


PAY_FIRST = {"content": "Paying.", "tool_calls": [call("p1", "pay", to="ada", amount=500)]}
