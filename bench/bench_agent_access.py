"""What identity and spend accounting cost agent runs: runs/s over HTTP with auth and spend limits
on vs off, and the spend check per model call.

* ``agent_runs_per_s_open`` / ``agent_runs_per_s_guarded``: two kernels in this process, each
  serving the runs API with a scripted FakeLLM agent (one model call a run) on SQLite; one with
  no ``AUTH_SECRET_KEY`` and no caps, the other with bearer tokens required and
  ``AGENTS_SPEND_LIMITS`` caps for the user, the tenant and the agent (per day and month) on the
  in-process store. Each run is started with ``POST`` and followed to its ``final`` event; rounds
  alternate between the kernels and the median is reported. The ratio is guarded / open.
* ``spend_check_per_call``: ``Invoker.chat`` on FakeLLM with ``meter()`` alone vs ``meter()`` and
  the spend policy checking and charging six counters (three scopes, two periods) in an
  in-memory store; the difference is the quota check's cost per model call, without network.

Run: ``.venv/bin/python bench/bench_agent_access.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench._util import emit  # noqa: E402
from core.contracts.types import ChatRequest, Message  # noqa: E402
from core.policies import meter  # noqa: E402
from core.runtime import Budget, Invoker, RunContext, Services  # noqa: E402
from core.state.kv import InMemoryStore  # noqa: E402
from core.testing import FakeLLM  # noqa: E402
from domains.agents.runs.quota import Cap, Payer, SpendLedger, spend_policy  # noqa: E402
from tests.domains.agents.agents_kit import OPS_AGENT_PLUGIN, agents_root, sse_events  # noqa: E402
from tests.kit import serving  # noqa: E402

ROUNDS = 5
RUNS_PER_ROUND = 30
CALLS = 3000
LIMITS = {
    scope: {period: {"usd": "1000", "tokens": 10**9} for period in ("day", "month")}
    for scope in ("user", "tenant", "agent")
}


async def one_run(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    started = await client.post("/agents/ops/runs", json={"input": "go"}, headers=headers)
    if started.status_code != 202:
        raise RuntimeError(started.text)
    run_id = started.json()["id"]
    async with client.stream("GET", f"/agents/runs/{run_id}/events", headers=headers) as response:
        async for event in sse_events(response):
            if event["event"] == "final":
                if event["data"]["status"] != "completed":
                    raise RuntimeError(f"run failed: {event['data']}")
                return


async def runs_per_second(client: httpx.AsyncClient, headers: dict[str, str]) -> float:
    start = time.perf_counter()
    for _ in range(RUNS_PER_ROUND):
        await one_run(client, headers)
    return RUNS_PER_ROUND / (time.perf_counter() - start)


async def http_bench(tmp: Path) -> tuple[float, float]:
    turns = [{"content": "done"}] * ((ROUNDS + 1) * RUNS_PER_ROUND * 2)
    os.environ.update(
        {"FAKE_LLM_SCRIPT": json.dumps(turns), "SENT_LOG": str(tmp / "s"), "LOG_LEVEL": "WARNING"}
    )
    for name in ("AUTH_SECRET_KEY", "AGENTS_SPEND_LIMITS", "DATABASE_URL", "STORE_URL"):
        os.environ.pop(name, None)
    tools = ("http", "db", "checkpoint", "store", "auth")
    plugins = {"ops_agent.py": OPS_AGENT_PLUGIN}
    open_root = agents_root(tmp, tools=tools, example=False, plugins=plugins, name="open")
    guarded_root = agents_root(
        tmp, tools=tools, example=False, plugins=plugins, domains=("auth_wiring",), name="guarded"
    )
    async with serving(open_root) as (_, open_url):
        os.environ["AUTH_SECRET_KEY"] = "bench-secret-" + "x" * 40
        os.environ["AGENTS_SPEND_LIMITS"] = json.dumps(LIMITS)
        async with serving(guarded_root) as (kernel, guarded_url):
            token = kernel.container.get("auth").create_token("bench", {"roles": ["user"], "tenant": "t"})
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx.AsyncClient(base_url=open_url) as open_client,
                httpx.AsyncClient(base_url=guarded_url) as guarded_client,
            ):
                if (await guarded_client.post("/agents/ops/runs", json={"input": "x"})).status_code != 401:
                    raise RuntimeError("the guarded kernel let an anonymous run start")
                await runs_per_second(open_client, {})  # warm up both
                await runs_per_second(guarded_client, headers)
                opened, guarded = [], []
                for _ in range(ROUNDS - 1):
                    opened.append(await runs_per_second(open_client, {}))
                    guarded.append(await runs_per_second(guarded_client, headers))
    return statistics.median(opened), statistics.median(guarded)


async def per_call_us(invoker: Invoker, n: int) -> float:
    request = ChatRequest([Message("user", "what is 6 * 7?")], "fake-model")
    ctx = RunContext(budget=Budget(max_cost_usd=Decimal(10**9)), services=Services(invoker=invoker))
    start = time.perf_counter()
    for _ in range(n):
        await invoker.chat(request, ctx)
    return (time.perf_counter() - start) / n * 1e6


async def spend_check_bench() -> tuple[float, float]:
    llm = FakeLLM("42")
    caps = [
        Cap(scope, period, Decimal(10**9), 10**12)
        for scope in ("user", "tenant", "agent")
        for period in ("day", "month")
    ]
    ledger = SpendLedger(InMemoryStore(), caps)
    plain = Invoker(llm=llm, chat_middleware=[meter()])
    spending = Invoker(llm=llm, chat_middleware=[meter(), spend_policy(ledger, Payer("u", "t", "a"))])
    await per_call_us(plain, 200)
    await per_call_us(spending, 200)
    a, b = [], []
    for _ in range(9):
        a.append(await per_call_us(plain, CALLS))
        b.append(await per_call_us(spending, CALLS))
    return statistics.median(a), statistics.median(b)


async def main() -> None:
    plain, spending = await spend_check_bench()
    emit("chat_call_metered", plain, "us")
    emit("chat_call_metered_and_spend_checked", spending, "us")
    emit("spend_check_per_call", spending - plain, "us")
    with tempfile.TemporaryDirectory() as tmp:
        opened, guarded = await http_bench(Path(tmp))
    emit("agent_runs_per_s_open", opened, "runs/s")
    emit("agent_runs_per_s_guarded", guarded, "runs/s")
    emit("agent_runs_guarded_vs_open", guarded / opened, "x")


if __name__ == "__main__":
    asyncio.run(main())
