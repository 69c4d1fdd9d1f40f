"""Small helpers shared by the benchmarks: medians of interleaved repeats, and output lines."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def interleaved(runs: int, *measures: Callable[[], float]) -> list[float]:
    """Run each measure ``runs`` times, alternating A, B, A, B ...; the median of each."""
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(runs):
        for i, measure in enumerate(measures):
            samples[i].append(measure())
    return [statistics.median(s) for s in samples]


def emit(name: str, value: float, unit: str) -> None:
    print(f"{name}: {value:.4g} {unit}", flush=True)
