"""How much the agent runtime costs on top of the model: the Invoker chain and a ReAct loop.

Measured with FakeLLM (no network), so the numbers are the runtime's own overhead:

* a chat call through ``Invoker.chat`` with 0, 3 and 6 pass-through middlewares (µs per call), the
  cost per layer, and the Invoker with no middleware against calling ``FakeLLM.chat`` directly;
* a 10-step ReAct run (10 tool-calling turns and a final answer) with FakeTool (ms per run).

Configurations are interleaved within each round and the median of the rounds is reported, because
the machine is small and noisy. Run: ``.venv/bin/python bench/bench_agents.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.agents import Agent  # noqa: E402
from core.agents.cognition import ReActCognition  # noqa: E402
from core.contracts.middleware import Call, Handler  # noqa: E402
from core.contracts.types import ChatRequest, Message, ToolCall  # noqa: E402
from core.runtime import Invoker, RunContext, Services  # noqa: E402
from core.testing import FakeLLM, FakeTool, Turn  # noqa: E402

ROUNDS = 21
CALLS_PER_ROUND = 3000
REACT_RUNS_PER_ROUND = 40
REACT_STEPS = 10


async def passthrough(call: Call, nxt: Handler) -> AsyncIterator[Any]:
    async for item in nxt(call):
        yield item


def context(invoker: Invoker) -> RunContext:
    return RunContext(services=Services(invoker=invoker))


async def per_call_us(fn: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n * 1e6


async def chat_bench() -> dict[str, float]:
    llm = FakeLLM("42")
    request = ChatRequest([Message("user", "what is 6 * 7?")], "fake-model")
    messages = request.messages
    invokers = {depth: Invoker(llm=llm, chat_middleware=[passthrough] * depth) for depth in (0, 3, 6)}
    contexts = {depth: context(inv) for depth, inv in invokers.items()}

    def through(depth: int) -> Callable[[], Awaitable[object]]:
        inv, ctx = invokers[depth], contexts[depth]
        return lambda: inv.chat(request, ctx)

    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "raw": lambda: llm.chat(messages=messages, model="fake-model"),
        "0": through(0),
        "3": through(3),
        "6": through(6),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():  # warm up
        await per_call_us(fn, 200)
    for _ in range(ROUNDS):
        for name, fn in cases.items():
            samples[name].append(await per_call_us(fn, CALLS_PER_ROUND))
    return {name: statistics.median(values) for name, values in samples.items()}


def react_script() -> list[Turn]:
    turns = [Turn(tool_calls=(ToolCall(f"c{i}", "lookup", {"step": i}),)) for i in range(REACT_STEPS)]
    return [*turns, Turn(content="done")]


async def react_bench() -> float:
    tool = FakeTool("lookup", responder={"ok": True})
    cognition = ReActCognition([tool], max_iterations=REACT_STEPS + 1)
    agent = Agent("bench", model="fake-model", cognition=cognition)
    script = react_script()

    async def one_run() -> None:
        ctx = context(Invoker(llm=FakeLLM.script(script)))
        result = await agent.run("go", ctx)
        if result.output != "done":
            raise RuntimeError(f"unexpected ReAct result: {result}")

    samples = []
    for _ in range(3):
        await one_run()
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(REACT_RUNS_PER_ROUND):
            await one_run()
        samples.append((time.perf_counter() - start) / REACT_RUNS_PER_ROUND * 1e3)
        tool.calls.clear()
    return statistics.median(samples)


async def main() -> None:
    chat = await chat_bench()
    react_ms = await react_bench()
    per_layer_3 = (chat["3"] - chat["0"]) / 3
    per_layer_6 = (chat["6"] - chat["0"]) / 6
    print(f"fakellm_chat_direct: {chat['raw']:.2f} us")
    print(f"invoker_chat_0_middlewares: {chat['0']:.2f} us")
    print(f"invoker_chat_3_middlewares: {chat['3']:.2f} us")
    print(f"invoker_chat_6_middlewares: {chat['6']:.2f} us")
    print(f"invoker_per_layer_3: {per_layer_3:.2f} us")
    print(f"invoker_per_layer_6: {per_layer_6:.2f} us")
    print(f"invoker_overhead_vs_direct: {chat['0'] / chat['raw']:.2f} x")
    print(f"invoker_6_vs_0_middlewares: {chat['6'] / chat['0']:.2f} x")
    print(f"react_{REACT_STEPS}_steps_run: {react_ms:.3f} ms")
    print(f"react_per_model_call: {react_ms * 1e3 / (REACT_STEPS + 1):.2f} us")
    print(f"react_per_model_call_vs_invoker_chat: {react_ms * 1e3 / (REACT_STEPS + 1) / chat['0']:.2f} x")


if __name__ == "__main__":
    asyncio.run(main())
