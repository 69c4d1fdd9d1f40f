"""The agent runs API with auth on: tokens required, runs owned, strangers told 404, admins see all."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
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
)
from tests.kit import serving

PUBLIC_AGENT_PLUGIN = """
    from core import BasePlugin
    from core.agents import Agent, SingleCallCognition
    from core.runs import catalog_for


    class GreeterPlugin(BasePlugin):
        def __init__(self, llm, container):
            self.llm = llm
            self.catalog = catalog_for(container)

        async def on_boot(self):
            agent = Agent("greeter", self.llm.default_model, SingleCallCognition())
            self.catalog.declare(agent, llm=self.llm, description="says hello", public=True)

        async def on_shutdown(self):
            self.catalog.withdraw("greeter")
"""


@pytest.fixture
async def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Kernel, Any]]:
    for name in [n for n in os.environ if n.startswith("AUTH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTH_SECRET_KEY", "agents-access-secret-" + "x" * 32)
    monkeypatch.setenv("SENT_LOG", str(tmp_path / "sent.log"))
    monkeypatch.setenv("GATE_LOG", str(tmp_path / "gate.log"))
    monkeypatch.setenv("GATE_FILE", str(tmp_path / "gate.open"))
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT",
        script(
            {"content": "", "tool_calls": [call("g1", "wait_for_gate")]},
            *({"content": f"answer {n}"} for n in range(6)),
        ),
    )
    root = agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "auth"),
        example=False,
        plugins={"ops_agent.py": OPS_AGENT_PLUGIN, "greeter.py": PUBLIC_AGENT_PLUGIN},
        domains=("auth_wiring",),
    )
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        yield kernel, client


def token(kernel: Kernel, subject: str, *roles: str, **claims: Any) -> dict[str, str]:
    auth = kernel.container.get("auth")
    value = auth.create_token(subject, {"roles": list(roles or ("user",)), **claims})
    return {"Authorization": f"Bearer {value}"}


async def test_anonymous_callers_get_401_except_on_public_agents(service: tuple[Kernel, Any]) -> None:
    kernel, client = service
    ann = token(kernel, "ann")
    started = await client.post("/agents/ops/runs", json={"input": "errand"}, headers=ann)
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]

    refused = [
        await client.post("/agents/ops/runs", json={"input": "errand"}),
        await client.post("/agents/nobody/runs", json={"input": "errand"}),
        await client.get("/agents/runs"),
        await client.get(f"/agents/runs/{run_id}"),
        await client.get("/agents/runs/no-such-run"),
        await client.get(f"/agents/runs/{run_id}/events"),
        await client.post(f"/agents/runs/{run_id}/cancel"),
        await client.post(f"/agents/runs/{run_id}/approval", json={"approve": True}),
        await client.get("/agents/usage"),
    ]
    assert [r.status_code for r in refused] == [401] * len(refused)
    assert all(r.headers["www-authenticate"].startswith("Bearer") for r in refused)
    forged = await client.get(f"/agents/runs/{run_id}", headers={"Authorization": "Bearer forged"})
    assert forged.status_code == 401

    assert [a["name"] for a in (await client.get("/agents")).json()["agents"]] == ["greeter"]
    listed = (await client.get("/agents", headers=ann)).json()["agents"]
    assert [(a["name"], a["public"]) for a in listed] == [("greeter", True), ("ops", False)]

    public = await client.post("/agents/greeter/runs", json={"input": "hi"})
    assert public.status_code == 202, public.text
    events = await collect_events(client, public.json()["id"])
    assert events[-1]["data"]["status"] == "completed"
    body = (await client.get(f"/agents/runs/{public.json()['id']}")).json()
    assert body["owner"] is None

    schema = (await client.get("/openapi.json")).json()
    assert "bearerAuth" in schema["components"]["securitySchemes"]
    assert schema["paths"]["/agents/runs"]["get"]["security"] == [{"bearerAuth": []}]
    for path, method in (
        ("/agents", "get"),
        ("/agents/{name}/runs", "post"),
        ("/agents/runs/{run_id}", "get"),
        ("/agents/runs/{run_id}/events", "get"),
        ("/agents/runs/{run_id}/cancel", "post"),
        ("/agents/runs/{run_id}/approval", "post"),
    ):
        assert schema["paths"][path][method]["security"] == [{"bearerAuth": []}, {}], path


async def test_a_user_sees_only_their_runs_and_an_admin_sees_all(
    service: tuple[Kernel, Any], tmp_path: Path
) -> None:
    kernel, client = service
    ann, bob, root = token(kernel, "ann", tenant="acme"), token(kernel, "bob"), token(kernel, "root", "admin")

    started = await client.post("/agents/ops/runs", json={"input": "bob's errand"}, headers=bob)
    assert started.status_code == 202, started.text
    bobs = started.json()["id"]
    await wait_for_line(tmp_path / "gate.log")  # bob's run is waiting inside its tool
    anns = (await client.post("/agents/greeter/runs", json={"input": "hi"}, headers=ann)).json()["id"]
    await collect_events(client, anns, headers=ann)

    for attempt in (
        await client.get(f"/agents/runs/{bobs}", headers=ann),
        await client.get(f"/agents/runs/{bobs}/events", headers=ann),
        await client.post(f"/agents/runs/{bobs}/cancel", headers=ann),
        await client.post(f"/agents/runs/{bobs}/approval", json={"approve": True}, headers=ann),
    ):
        assert attempt.status_code == 404, attempt.text
        assert attempt.json()["error"]["kind"] == "not_found"
    assert (await client.get(f"/agents/runs/{bobs}", headers=bob)).json()["status"] == "running"
    not_waiting = await client.post(f"/agents/runs/{bobs}/approval", json={"approve": True}, headers=bob)
    assert not_waiting.status_code == 409  # his own run, but it waits on no approval

    def ids(response: httpx.Response) -> list[str]:
        assert response.status_code == 200, response.text
        return [run["id"] for run in response.json()["runs"]]

    assert ids(await client.get("/agents/runs", headers=ann)) == [anns]
    assert ids(await client.get("/agents/runs", headers=bob)) == [bobs]
    assert ids(await client.get("/agents/runs", headers=root)) == [anns, bobs]
    ann_view = (await client.get(f"/agents/runs/{anns}", headers=ann)).json()
    assert (ann_view["owner"], ann_view["tenant"]) == ("ann", "acme")
    assert (await client.get("/agents/runs", headers=root)).json()["runs"][0]["owner"] == "ann"

    admin_view = await client.get(f"/agents/runs/{bobs}", headers=root)
    assert admin_view.status_code == 200 and admin_view.json()["owner"] == "bob"
    cancelled = await client.post(f"/agents/runs/{bobs}/cancel", headers=root)
    assert cancelled.status_code == 202, cancelled.text
    (tmp_path / "gate.open").touch()
    events = await collect_events(client, bobs, headers=root)
    assert events[-1]["data"]["status"] == "cancelled"
