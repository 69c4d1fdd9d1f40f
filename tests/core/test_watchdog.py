"""The event-loop watchdog on a booted kernel: a stall is blamed on the plugin, counted, and
repeated stalls fail liveness; the dump shows RSS."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from core.watchdog import LoopWatchdog
from tests.kit import booted, until, write

BLOCKING_PLUGIN = """
    import time
    from core import BasePlugin

    class Sleeper(BasePlugin):
        def block(self, seconds):
            time.sleep(seconds)  # plugin code holding the event loop
"""


async def test_a_stall_is_blamed_on_the_plugin_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LOOP_STALL_THRESHOLD", "0.2")
    monkeypatch.setenv("LOOP_STALL_LIVENESS", "0.5")
    write(tmp_path, "domains/slow/plugins/sleeper.py", BLOCKING_PLUGIN)
    async with booted(tmp_path) as kernel:
        sleeper = kernel.plugins["slow.Sleeper"].instance
        sleeper.block(0.5)  # type: ignore[attr-defined]
        await until(lambda: kernel.registry.get_system_dump()["kernel"]["loop"]["stalls"] == 1, "counted")
        loop = kernel.registry.get_system_dump()["kernel"]["loop"]
        assert loop["last"]["plugin"] == "slow.Sleeper"
        assert loop["last"]["where"].endswith("sleeper.py:6")
        assert loop["last"]["seconds"] >= 0.4
        assert not loop["unhealthy"]  # one stall of 0.5 s is not over LOOP_STALL_LIVENESS
        assert "slow.Sleeper" in caplog.text and "time.sleep(seconds)" in caplog.text
        sleeper.block(0.5)  # type: ignore[attr-defined]
        await until(lambda: kernel.registry.get_system_dump()["kernel"]["loop"]["stalls"] == 2, "counted")
        assert kernel.registry.get_system_dump()["kernel"]["loop"]["unhealthy"]
        memory = kernel.registry.get_system_dump()["kernel"]["memory"]
        assert memory["rss_mib"] > 1


async def test_rss_trend_over_samples() -> None:
    watchdog = LoopWatchdog(asyncio.get_running_loop(), lambda _: None, rss_every=0.01)
    watchdog.rss.extend([(time.time() - 60, 100 * 2**20), (time.time(), 160 * 2**20)])
    memory = watchdog.memory()
    assert memory["rss_mib"] == 160 and memory["first_mib"] == 100
    assert 59 <= memory["trend_mib_per_min"] <= 61
