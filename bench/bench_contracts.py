"""What the agent kernel's contracts cost: freezing payloads, identity hashing, chain() layers.

Run: .venv/bin/python bench/bench_contracts.py   (stdlib only; about 20 s)

1. Building a ToolCall with the spec's example arguments against the same dataclass without the
   freeze (extra us per construction); freezing a 10-key payload nested three deep (10 keys per
   level, 1,000 leaves) against json.dumps of the same payload (target: ratio <= 1).
2. hash(ToolCall) with a 1-key and a 100,000-key arguments dict (identity hash: flat in size),
   with stable_hash of the same arguments for contrast.
3. chain() overhead per pass-through middleware for a 2-delta chat stream, with 0, 3 and 6 layers
   (target: <= 1.5 us per layer).

Each figure is the median of several rounds; within a round the compared variants run
interleaved, so machine noise hits them alike.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.contracts.middleware import Call, Handler, chain  # noqa: E402
from core.contracts.types import ChatRequest, Delta, Message, ToolCall, Usage  # noqa: E402
from core.serialization import FrozenDict, deep_freeze, stable_hash  # noqa: E402

ROUNDS = 9
EXAMPLE_ARGUMENTS = {"q": "octopus", "filters": {"tags": ["marine"]}}


@dataclass(frozen=True, slots=True)
class UnfrozenToolCall:
    """ToolCall's exact shape, minus the freeze: the baseline for the construction cost."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __hash__(self) -> int:
        return hash((self.id, self.name))


def per_call_us(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e6


def interleaved(variants: dict[str, Callable[[], object]], number: int) -> dict[str, float]:
    """Median microseconds per call for each variant, running the variants in turn each round."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, fn in variants.items():
            samples[name].append(per_call_us(fn, number))
    return {name: statistics.median(values) for name, values in samples.items()}


def report(name: str, value: float, unit: str) -> None:
    print(f"{name}: {value:.3f} {unit}")


def bench_freeze() -> None:
    arguments = EXAMPLE_ARGUMENTS
    times = interleaved(
        {
            "plain": lambda: UnfrozenToolCall("c1", "search", arguments),
            "frozen": lambda: ToolCall("c1", "search", arguments),
        },
        number=50_000,
    )
    report("toolcall_unfrozen", times["plain"], "us")
    report("toolcall_frozen", times["frozen"], "us")
    report("toolcall_freeze_extra", times["frozen"] - times["plain"], "us")

    nested = {f"a{i}": {f"b{j}": {f"c{k}": k for k in range(10)} for j in range(10)} for i in range(10)}
    times = interleaved(
        {"freeze": lambda: deep_freeze(nested), "json": lambda: json.dumps(nested)},
        number=300,
    )
    report("nested_10x3_freeze", times["freeze"], "us")
    report("nested_10x3_json_dumps", times["json"], "us")
    report("nested_10x3_freeze_vs_json_ratio", times["freeze"] / times["json"], "x")
    frozen = deep_freeze(nested)
    report("refreeze_already_frozen", interleaved({"r": lambda: deep_freeze(frozen)}, 200_000)["r"], "us")


def bench_hash() -> None:
    small = ToolCall("c1", "search", {"q": "octopus"})
    large = ToolCall("c1", "search", {f"k{i}": i for i in range(100_000)})
    times = interleaved({"small": lambda: hash(small), "large": lambda: hash(large)}, number=200_000)
    report("toolcall_hash_1_key", times["small"], "us")
    report("toolcall_hash_100k_keys", times["large"], "us")
    report("toolcall_hash_100k_vs_1_ratio", times["large"] / times["small"], "x")
    small_args, large_args = small.arguments, large.arguments
    report("stable_hash_1_key", interleaved({"s": lambda: stable_hash(small_args)}, 20_000)["s"], "us")
    large_ms = statistics.median(per_call_us(lambda: stable_hash(large_args), 3) for _ in range(3)) / 1e3
    report("stable_hash_100k_keys", large_ms, "ms")


async def two_deltas(call: Call) -> AsyncIterator[Any]:
    yield Delta(text="4")
    yield Delta(text="2", usage=Usage(10, 5), finish_reason="stop")


async def pass_through(call: Call, nxt: Handler) -> AsyncIterator[Any]:
    async for item in nxt(call):
        yield item


async def drive_us(handler: Handler, call: Call, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        async for _item in handler(call):
            pass
    return (time.perf_counter() - start) / number * 1e6


async def bench_chain() -> None:
    call = Call("chat", ChatRequest([Message("user", "hi")], "fake-model"), ctx=None)
    handlers = {layers: chain([pass_through] * layers, two_deltas) for layers in (0, 3, 6)}
    samples: dict[int, list[float]] = {layers: [] for layers in handlers}
    for _ in range(ROUNDS):
        for layers, handler in handlers.items():
            samples[layers].append(await drive_us(handler, call, 20_000))
    times = {layers: statistics.median(values) for layers, values in samples.items()}
    for layers, value in times.items():
        report(f"chain_{layers}_layers_2_deltas", value, "us")
    report("chain_per_layer_3", (times[3] - times[0]) / 3, "us")
    report("chain_per_layer_6", (times[6] - times[0]) / 6, "us")


def main() -> None:
    bench_freeze()
    bench_hash()
    asyncio.run(bench_chain())


if __name__ == "__main__":
    main()
