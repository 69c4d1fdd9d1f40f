"""Microkernel costs: ToolProxy overhead per call, and boot against hand-wiring.

- proxy overhead: the same method called directly and through the proxy, in one process, in
  interleaved rounds; the difference per call, in ns.
- boot: a generated root with 10 tools and 100 plugins, each measurement in a fresh (cold)
  process: ``Kernel(root).boot()`` against importing the same files, constructing, setting up
  and ``on_boot``-ing the same objects by hand with ``asyncio.gather``; with bytecode caching
  off and on, medians (and ranges) of 15 interleaved runs each, goal <= 1.10x. The kernel pauses
  the cyclic collector while it boots, where hand-wiring pays the collections its allocations
  trigger; a serving process then freezes what boot built, so those collections never run. A
  process that boots and goes on without serving pays one collection of boot's objects later.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import emit, emit_ratio, interleaved  # noqa: E402
from core import BaseTool, Container, Registry  # noqa: E402

CALLS = 200_000


class Adder(BaseTool):
    name = "adder"

    def add(self, a: int, b: int) -> int:
        return a + b

    async def aadd(self, a: int, b: int) -> int:
        return a + b


def proxy_overhead() -> None:
    tool = Adder()
    container = Container(Registry())
    container.add(tool)
    proxy = container.get("adder")

    def per_call_ns(fn: object) -> float:
        return timeit.timeit(lambda: fn(1, 2), number=CALLS) / CALLS * 1e9  # type: ignore[operator]

    direct, proxied = interleaved(7, lambda: per_call_ns(tool.add), lambda: per_call_ns(proxy.add))
    emit("proxy_sync_direct", direct, "ns")
    emit("proxy_sync_proxied", proxied, "ns")
    emit("proxy_sync_overhead", proxied - direct, "ns")

    async def loop(fn: object, n: int) -> float:
        start = asyncio.get_running_loop().time()
        for _ in range(n):
            await fn(1, 2)  # type: ignore[operator]
        return (asyncio.get_running_loop().time() - start) / n * 1e9

    async def measure() -> tuple[float, float]:
        a: list[float] = []
        b: list[float] = []
        for _ in range(7):
            a.append(await loop(tool.aadd, CALLS))
            b.append(await loop(proxy.aadd, CALLS))
        a.sort()
        b.sort()
        return a[3], b[3]

    adirect, aproxied = asyncio.run(measure())
    emit("proxy_async_direct", adirect, "ns")
    emit("proxy_async_proxied", aproxied, "ns")
    emit("proxy_async_overhead", aproxied - adirect, "ns")


TOOL = """
from core import BaseTool

class Tool{i}(BaseTool):
    name = "tool{i}"

    async def setup(self):
        self.ready = True

    def ping(self, who):
        return who
"""

PLUGIN = """
from core import BasePlugin

class Plugin{i}(BasePlugin):
    def __init__(self, tool{a}, tool{b}):
        self.first = tool{a}
        self.second = tool{b}

    async def on_boot(self):
        self.first.ping("{i}")
        self.second.ping("{i}")
"""

KERNEL_BOOT = """
import asyncio, sys, time
sys.path.insert(0, {project!r})
import core
from core import Kernel
async def main():
    start = time.perf_counter()
    await Kernel({root!r}).boot()
    print(time.perf_counter() - start)
asyncio.run(main())
"""

HAND_WIRED = """
import asyncio, importlib.util, sys, time
from pathlib import Path
sys.path.insert(0, {project!r})
import core
from core import BaseTool, BasePlugin
root = Path({root!r})

def load(path):
    name = "hand_" + "_".join(path.relative_to(root).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def classes(module, base):
    return [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, base) and v is not base]

async def main():
    start = time.perf_counter()
    tools = {{}}
    for path in sorted((root / "tools").rglob("*.py")):
        for cls in classes(load(path), BaseTool):
            tools[cls.name] = cls()
    await asyncio.gather(*(t.setup() for t in tools.values()))
    plugins = []
    for path in sorted((root / "domains").glob("*/plugins/*.py")):
        for cls in classes(load(path), BasePlugin):
            a, b = cls.__init__.__code__.co_varnames[1:3]
            plugins.append(cls(tools[a], tools[b]))
    await asyncio.gather(*(p.on_boot() for p in plugins))
    print(time.perf_counter() - start)
asyncio.run(main())
"""


def generate_root(root: Path) -> None:
    for i in range(10):
        path = root / "tools" / f"tool{i}" / f"tool{i}.py"
        path.parent.mkdir(parents=True)
        path.write_text(textwrap.dedent(TOOL.format(i=i)))
    for i in range(100):
        path = root / "domains" / f"domain{i % 10}" / "plugins" / f"plugin{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(PLUGIN.format(i=i, a=i % 10, b=(i + 3) % 10)))


BOOT_RUNS = 15


def cold_run(script: str, env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def boot_ratio() -> None:
    """Boot against hand-wiring, with bytecode caching off (``PYTHONDONTWRITEBYTECODE=1``, as
    this machine sets it) and on (as deployed: unset, the caches warmed by a first run), each
    the median of ``BOOT_RUNS`` runs interleaved kernel / hand-wired (order alternating)."""
    project = str(Path(__file__).resolve().parent.parent)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    modes = {"bytecode_off": {**base, "PYTHONDONTWRITEBYTECODE": "1"}, "bytecode_on": base}
    for mode, env in modes.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            generate_root(root)
            kernel_script = KERNEL_BOOT.format(project=project, root=str(root))
            hand_script = HAND_WIRED.format(project=project, root=str(root))
            for _ in range(2):  # warm the page cache (and, with caching on, the bytecode caches)
                cold_run(kernel_script, env)
                cold_run(hand_script, env)
            kernel: list[float] = []
            hand: list[float] = []
            for run in range(BOOT_RUNS):
                pair = [(kernel, kernel_script), (hand, hand_script)]
                for samples, script in pair if run % 2 == 0 else reversed(pair):
                    samples.append(cold_run(script, env))
        k, h = statistics.median(kernel), statistics.median(hand)
        emit(f"boot_10_tools_100_plugins_{mode}_kernel", k * 1000, "ms")
        emit(f"boot_10_tools_100_plugins_{mode}_kernel_range_low", min(kernel) * 1000, "ms")
        emit(f"boot_10_tools_100_plugins_{mode}_kernel_range_high", max(kernel) * 1000, "ms")
        emit(f"boot_10_tools_100_plugins_{mode}_hand_wired", h * 1000, "ms")
        emit(f"boot_10_tools_100_plugins_{mode}_hand_wired_range_low", min(hand) * 1000, "ms")
        emit(f"boot_10_tools_100_plugins_{mode}_hand_wired_range_high", max(hand) * 1000, "ms")
        floor = f"hand-wiring the same files and objects, {h * 1000:.4g} ms ({mode.replace('_', ' ')})"
        emit_ratio(f"boot_ratio_kernel_vs_hand_wired_{mode}", k / h, floor, "<= 1.10x")


def watchdog_cost() -> None:
    """The event-loop watchdog's cost: one heartbeat callback, and a loop tick with it running."""
    from core.watchdog import LoopWatchdog

    async def ticks(n: int) -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(n):
            await asyncio.sleep(0)
        return (loop.time() - start) / n * 1e9

    async def measure() -> tuple[float, float, float]:
        watchdog = LoopWatchdog(asyncio.get_running_loop(), lambda _: None)
        started = timeit.default_timer()
        for _ in range(CALLS):
            watchdog._heartbeat()
            watchdog._handle.cancel()  # type: ignore[union-attr]  # one timer at a time, as when running
        beat = (timeit.default_timer() - started) / CALLS * 1e9
        watchdog.stop()
        bare: list[float] = []
        watched: list[float] = []
        for _ in range(5):
            bare.append(await ticks(CALLS // 4))
            watchdog = LoopWatchdog(asyncio.get_running_loop(), lambda _: None)
            watchdog.start()
            watched.append(await ticks(CALLS // 4))
            watchdog.stop()
        return beat, sorted(bare)[2], sorted(watched)[2]

    beat, bare, watched = asyncio.run(measure())
    emit("watchdog_heartbeat", beat, "ns")
    emit("loop_tick_bare", bare, "ns")
    emit("loop_tick_watched", watched, "ns")
    emit("watchdog_cost_per_tick", watched - bare, "ns")


if __name__ == "__main__":
    proxy_overhead()
    watchdog_cost()
    boot_ratio()
