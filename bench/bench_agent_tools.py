"""The agent kernel's tools and the agents domain, measured end to end.

1. ``store``: set+get pairs and increments per second on each backend (memory, SQLite, and
   PostgreSQL / Redis when their local servers answer), with ``core.state.stores.InMemoryStore``
   as the in-process baseline.
2. ``checkpoint``: saves and ``latest`` reads per second on each backend (memory, SQLite,
   PostgreSQL) with a 2 KB state, against ``InMemoryCheckpointStore``.
3. Time to first token: a local OpenAI-compatible server (the one the tests use) streams an
   answer; measured from the request to the first token, calling the server directly with httpx,
   and through the whole service (``POST /agents/{name}/runs``, then the run's event stream: HTTP
   -> agent -> llm tool -> server -> SSE back). Interleaved; medians; the difference is the
   service's own cost.
4. Agent runs per second through the HTTP API with a FakeLLM-backed ``llm`` tool: start a run and
   follow its events to the final one, 8 clients at a time, on the default SQLite database; and the
   same agent run in-process (``Agent.run``) as the floor.

Run: ``.venv/bin/python bench/bench_agent_tools.py`` (about 40 s). Prints ``name: value unit``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench._util import emit  # noqa: E402
from core.agents import Agent  # noqa: E402
from core.contracts.ports import Checkpoint  # noqa: E402
from core.registry import Registry  # noqa: E402
from core.state.stores import InMemoryCheckpointStore, InMemoryStore  # noqa: E402
from core.testing import FakeLLM, make_test_ctx  # noqa: E402
from tests.domains.agents.agents_kit import agents_root, collect_events  # noqa: E402
from tests.kit import serving, write  # noqa: E402
from tests.tools.llm.openai_server import OpenAIServer, Reply, chunk, usage_chunk  # noqa: E402
from tests.tools.store.services import postgres_url, redis_namespace  # noqa: E402

STORE_OPS = 1000
CHECKPOINT_OPS = 300
ROUNDS = 7
TTFT_ROUNDS = 41
RUNS = 300
CLIENTS = 8
STATE = {"transcript": [{"role": "user", "content": "x" * 200}] * 8, "usage": {"input_tokens": 10}}

ECHO_AGENT_PLUGIN = """
    from core import BasePlugin
    from core.agents import Agent
    from core.runs import catalog_for


    class BenchAgentPlugin(BasePlugin):
        def __init__(self, llm, container):
            self.llm = llm
            self.catalog = catalog_for(container)

        async def on_boot(self):
            self.catalog.declare(Agent("bench", self.llm.default_model), llm=self.llm)
"""

FAKE_LLM_TOOL = """
    from core import BaseTool
    from core.contracts.types import assemble_deltas
    from core.testing import FakeLLM


    class BenchLlm(BaseTool):
        name = "llm"
        default_model = "fake-model"

        def __init__(self):
            self.fake = FakeLLM("The answer is forty-two.")

        async def stream(self, *, messages, model, **settings):
            async for delta in self.fake.stream(messages=messages, model=model):
                yield delta

        async def chat(self, **kwargs):
            return assemble_deltas([d async for d in self.stream(**kwargs)])

        async def complete(self, *, system, user, model, **settings):
            return await self.fake.complete(system=system, user=user, model=model)
"""


def median_rate(samples: list[float]) -> float:
    return statistics.median(samples)


async def rate(n: int, op: Callable[[int], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    for i in range(n):
        await op(i)
    return n / (time.perf_counter() - start)


def bound(tool: Any, root: Path) -> Any:
    registry = Registry()
    registry.register_tool(tool.name)
    tool.bind(project_root=root, registry=registry)
    return tool


# -- 1. store ---------------------------------------------------------------------------------------


@asynccontextmanager
async def store_on(backend: str, root: Path) -> Any:
    from tools.store.store_tool import StoreTool

    service: AbstractAsyncContextManager[Any] = nullcontext()
    if backend == "postgresql":
        service = postgres_url()
    elif backend == "redis":
        service = redis_namespace()
    async with service as resource:
        os.environ["STORE_URL"] = {
            "memory": "memory://",
            "sqlite": "sqlite:///bench-store.db",
            "postgresql": resource,
            "redis": resource[0] if backend == "redis" else "",
        }[backend]
        if backend == "redis":
            os.environ["STORE_KEY_PREFIX"] = resource[1]
        tool = bound(StoreTool(), root)
        try:
            await tool.setup()
            yield tool
        finally:
            await tool.shutdown()
            for name in ("STORE_URL", "STORE_KEY_PREFIX"):
                os.environ.pop(name, None)


async def store_rates(store: Any) -> tuple[float, float]:
    async def pair(i: int) -> None:
        await store.set(f"k{i % 50}", {"n": i, "text": "value"})
        await store.get(f"k{i % 50}")

    async def increment(i: int) -> None:
        await store.increment("counter")

    return await rate(STORE_OPS, pair) * 2, await rate(STORE_OPS, increment)


async def bench_store(root: Path) -> None:
    reference = InMemoryStore()
    for backend in ("memory", "sqlite", "postgresql", "redis"):
        try:
            async with store_on(backend, root) as tool:
                pairs, increments, base_pairs = [], [], []
                for _ in range(ROUNDS):
                    base_pairs.append((await store_rates(reference))[0])
                    ops, incs = await store_rates(tool)
                    pairs.append(ops)
                    increments.append(incs)
        except BaseException as exc:  # a local server that is not there: say so, keep going
            if isinstance(exc, KeyboardInterrupt):
                raise
            print(f"store_{backend}: skipped ({type(exc).__name__})", flush=True)
            continue
        emit(f"store_{backend}_set_get_ops", median_rate(pairs), "ops/s")
        emit(f"store_{backend}_increment_ops", median_rate(increments), "ops/s")
        emit(f"store_{backend}_vs_inmemorystore_ratio", median_rate(pairs) / median_rate(base_pairs), "x")


# -- 2. checkpoint ----------------------------------------------------------------------------------


@asynccontextmanager
async def checkpoint_on(backend: str, root: Path) -> Any:
    from tools.checkpoint.checkpoint_tool import CheckpointTool

    service: AbstractAsyncContextManager[Any] = postgres_url() if backend == "postgresql" else nullcontext()
    async with service as url:
        os.environ["CHECKPOINT_URL"] = {
            "memory": "memory://",
            "sqlite": "sqlite:///bench-checkpoints.db",
            "postgresql": url or "",
        }[backend]
        tool = bound(CheckpointTool(), root)
        try:
            await tool.setup()
            yield tool
        finally:
            await tool.shutdown()
            os.environ.pop("CHECKPOINT_URL", None)


async def checkpoint_rates(checkpoints: Any, run: str) -> tuple[float, float]:
    async def save(i: int) -> None:
        await checkpoints.save(Checkpoint(run, i + 1, STATE, float(i), "running"))

    async def latest(i: int) -> None:
        await checkpoints.latest(run)

    return await rate(CHECKPOINT_OPS, save), await rate(CHECKPOINT_OPS, latest)


async def bench_checkpoint(root: Path) -> None:
    for backend in ("memory", "sqlite", "postgresql"):
        try:
            async with checkpoint_on(backend, root) as tool:
                saves, reads, base = [], [], []
                for round_number in range(ROUNDS):
                    reference = InMemoryCheckpointStore()
                    base.append((await checkpoint_rates(reference, "r"))[0])
                    written, read = await checkpoint_rates(tool, f"run-{round_number}")
                    saves.append(written)
                    reads.append(read)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            print(f"checkpoint_{backend}: skipped ({type(exc).__name__})", flush=True)
            continue
        emit(f"checkpoint_{backend}_save_ops", median_rate(saves), "ops/s")
        emit(f"checkpoint_{backend}_latest_ops", median_rate(reads), "ops/s")
        emit(f"checkpoint_{backend}_vs_inmemory_save_ratio", median_rate(saves) / median_rate(base), "x")


# -- 3. time to first token -------------------------------------------------------------------------


def streamed_answer(body: dict[str, Any]) -> Reply:
    words = ["The", " answer", " is", " forty-two."]
    return Reply(
        [chunk(content=w) for w in words] + [chunk(finish_reason="stop"), usage_chunk(10, 4)], delay=0.002
    )


async def direct_ttft(client: httpx.AsyncClient) -> float:
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    start = time.perf_counter()
    async with client.stream("POST", "/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:") and '"content"' in line:
                return time.perf_counter() - start
    raise RuntimeError("no token")


async def service_ttft(client: httpx.AsyncClient) -> float:
    start = time.perf_counter()
    run_id = (await client.post("/agents/bench/runs", json={"input": "q"})).json()["id"]
    events = await collect_events(client, run_id, until="message_delta")
    if events[-1]["event"] != "message_delta":
        raise RuntimeError(f"no token: {events}")
    return time.perf_counter() - start


async def bench_ttft(tmp: Path) -> None:
    async with OpenAIServer(streamed_answer) as server:
        os.environ.update({"LLM_BASE_URL": server.base_url, "LLM_MODEL": "m"})
        root = agents_root(
            tmp,
            tools=("http", "db", "checkpoint", "store", "llm"),
            scripted_llm=False,
            example=False,
            plugins={"bench_agent.py": ECHO_AGENT_PLUGIN},
            name="ttft",
        )
        async with serving(root) as (_, base_url):
            async with (
                httpx.AsyncClient(base_url=base_url, timeout=30) as service,
                httpx.AsyncClient(base_url=server.base_url, timeout=30) as direct,
            ):
                await direct_ttft(direct)
                await service_ttft(service)
                directs, services = [], []
                for _ in range(TTFT_ROUNDS):
                    directs.append(await direct_ttft(direct))
                    services.append(await service_ttft(service))
    d, s = statistics.median(directs) * 1000, statistics.median(services) * 1000
    emit("ttft_direct_server", d, "ms")
    emit("ttft_through_service", s, "ms")
    emit("ttft_service_overhead", s - d, "ms")
    emit("ttft_service_vs_direct_ratio", s / d, "x")


# -- 4. agent runs per second -----------------------------------------------------------------------


async def bench_runs(tmp: Path) -> None:
    root = agents_root(
        tmp,
        tools=("http", "db", "checkpoint", "store"),
        scripted_llm=False,
        example=False,
        plugins={"bench_agent.py": ECHO_AGENT_PLUGIN},
        name="runs",
    )
    write(root, "tools/bench_llm/bench_llm_tool.py", FAKE_LLM_TOOL)
    async with serving(root) as (_, base_url):
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:

            async def one() -> None:
                run_id = (await client.post("/agents/bench/runs", json={"input": "q"})).json()["id"]
                events = await collect_events(client, run_id)
                if events[-1]["data"]["status"] != "completed":
                    raise RuntimeError(events[-1])

            await one()
            queue = asyncio.Queue[int]()
            for n in range(RUNS):
                queue.put_nowait(n)

            async def client_loop() -> None:
                while not queue.empty():
                    queue.get_nowait()
                    await one()

            start = time.perf_counter()
            await asyncio.gather(*(client_loop() for _ in range(CLIENTS)))
            http_rate = RUNS / (time.perf_counter() - start)

    agent = Agent("bench", "fake-model")
    llm = FakeLLM("The answer is forty-two.")
    start = time.perf_counter()
    for _ in range(RUNS * 5):
        await agent.run("q", make_test_ctx(llm=llm))
    direct_rate = RUNS * 5 / (time.perf_counter() - start)
    emit("agent_runs_http", http_rate, "runs/s")
    emit("agent_runs_in_process", direct_rate, "runs/s")
    emit("agent_runs_http_vs_in_process_ratio", http_rate / direct_rate, "x")


async def main() -> None:
    saved = dict(os.environ)
    for name in [
        n for n in os.environ if n.startswith(("STORE_", "CHECKPOINT_", "LLM_", "DATABASE_URL", "OTEL_"))
    ]:
        if name != "DATABASE_URL_TEST":
            del os.environ[name]
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    try:
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder)
            await bench_store(tmp)
            await bench_checkpoint(tmp)
            await bench_ttft(tmp)
            await bench_runs(tmp)
    finally:
        os.environ.clear()
        os.environ.update(saved)


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    asyncio.run(main())
