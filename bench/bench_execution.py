"""Cost of the execution primitives against the plain asyncio they wrap.

* fan-out: ``gather_bounded`` / ``gather_best_effort`` over 100 trivial coroutines, per slot, against
  ``asyncio.TaskGroup`` and ``asyncio.gather`` in the same run (and with a semaphore of 10).
* ``run_with_resilience`` around a call that succeeds first time, against awaiting the call directly.
* ``CancellationToken.raise_if_cancelled`` at a safe point.

Each figure is the median of interleaved repeats. Run: ``.venv/bin/python bench/bench_execution.py``.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import sys
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.execution import (  # noqa: E402 - the project root is put on the path first
    CancellationToken,
    gather_best_effort,
    gather_bounded,
    run_with_resilience,
)

SLOTS = 100
REPEATS = 31


async def trivial() -> int:
    await asyncio.sleep(0)
    return 1


async def via_taskgroup() -> None:
    async with asyncio.TaskGroup() as group:
        for _ in range(SLOTS):
            group.create_task(trivial())


async def via_gather() -> None:
    await asyncio.gather(*(trivial() for _ in range(SLOTS)))


async def via_taskgroup_sem() -> None:
    sem = asyncio.Semaphore(10)

    async def bounded() -> int:
        async with sem:
            return await trivial()

    async with asyncio.TaskGroup() as group:
        for _ in range(SLOTS):
            group.create_task(bounded())


async def via_gather_bounded() -> None:
    await gather_bounded(trivial() for _ in range(SLOTS))


async def via_gather_bounded_sem() -> None:
    await gather_bounded((trivial() for _ in range(SLOTS)), sem=10)


async def via_best_effort() -> None:
    await gather_best_effort(trivial() for _ in range(SLOTS))


def time_async(loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[None]], rounds: int) -> float:
    async def many() -> None:
        for _ in range(rounds):
            await make()

    start = time.perf_counter()
    loop.run_until_complete(many())
    return (time.perf_counter() - start) / rounds


def interleaved(cases: dict[str, Callable[[], float]]) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(REPEATS):
        for name, measure in cases.items():
            samples[name].append(measure())
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    loop = asyncio.new_event_loop()
    try:
        fan_out = interleaved(
            {
                name: functools.partial(time_async, loop, fn, 20)
                for name, fn in {
                    "taskgroup": via_taskgroup,
                    "gather": via_gather,
                    "taskgroup_sem10": via_taskgroup_sem,
                    "gather_bounded": via_gather_bounded,
                    "gather_bounded_sem10": via_gather_bounded_sem,
                    "gather_best_effort": via_best_effort,
                }.items()
            }
        )

        async def succeed() -> int:
            return 1

        async def direct() -> None:
            await succeed()

        async def resilient() -> None:
            await run_with_resilience(succeed, attempts=3)

        calls = interleaved(
            {
                "direct": lambda: time_async(loop, direct, 2000),
                "resilient": lambda: time_async(loop, resilient, 2000),
            }
        )
    finally:
        loop.close()

    token = CancellationToken()
    checks = interleaved(
        {"check": lambda: min(timeit.repeat(token.raise_if_cancelled, number=20000, repeat=3))}
    )

    per_slot = {name: value / SLOTS * 1e6 for name, value in fan_out.items()}
    for name, value in per_slot.items():
        print(f"fanout_{name}_per_slot: {value:.2f} us")
    print(f"gather_bounded_vs_taskgroup: {per_slot['gather_bounded'] / per_slot['taskgroup']:.2f} x")
    sem_ratio = per_slot["gather_bounded_sem10"] / per_slot["taskgroup_sem10"]
    print(f"gather_bounded_sem10_vs_taskgroup_sem10: {sem_ratio:.2f} x")
    print(f"gather_best_effort_vs_taskgroup: {per_slot['gather_best_effort'] / per_slot['taskgroup']:.2f} x")
    extra = (calls["resilient"] - calls["direct"]) * 1e6
    print(f"run_with_resilience_extra: {extra:.2f} us")
    print(f"run_with_resilience_vs_direct: {calls['resilient'] / calls['direct']:.2f} x")
    print(f"raise_if_cancelled: {checks['check'] / 20000 * 1e9:.1f} ns")


if __name__ == "__main__":
    main()
