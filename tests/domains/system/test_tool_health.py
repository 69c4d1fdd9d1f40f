"""ToolHealthPlugin: health_check() verdicts become tool statuses, on a timer, without metrics."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core import BaseTool, Container, Registry, ToolStatus
from domains.system.plugins.tool_health import ToolHealthPlugin
from tests.kit import until


class Probe(BaseTool):
    """A tool whose next health answer the test sets: a bool, an exception, or "hang"."""

    def __init__(self) -> None:
        self.answer: Any = True
        self.calls = 0
        self.checked = asyncio.Event()

    async def health_check(self) -> bool:
        self.calls += 1
        self.checked.set()
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer == "hang":
            await asyncio.Event().wait()
        return bool(self.answer)


class SyncProbe(BaseTool):
    name = "sync_probe"

    def __init__(self) -> None:
        self.threads: list[int] = []

    def health_check(self) -> bool:
        self.threads.append(threading.get_ident())
        return False


class Silent(BaseTool):
    name = "silent"


def probe(name: str) -> Probe:
    made = type(f"Probe_{name}", (Probe,), {"name": name})()
    assert isinstance(made, Probe)
    return made


class System:
    def __init__(self, *tools: BaseTool) -> None:
        self.registry = Registry()
        self.container = Container(self.registry)
        for tool in tools:
            tool.bind(project_root=Path("."), registry=self.registry)
            self.container.add(tool)

    def status(self, name: str) -> tuple[str, str | None]:
        tool = self.registry.get_system_dump()["tools"][name]
        return tool["status"], tool["message"]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("HEALTH_CHECK_INTERVAL", raising=False)
    monkeypatch.setenv("HEALTH_CHECK_TIMEOUT", "0.05")
    return monkeypatch


async def test_false_fails_a_tool_and_true_recovers_it(env: pytest.MonkeyPatch) -> None:
    db = probe("db")
    system = System(db)
    checker = ToolHealthPlugin(system.container)
    assert await checker.check_once() == {"db": "OK"}
    db.answer = False
    assert await checker.check_once() == {"db": "FAIL"}
    assert system.status("db") == ("FAIL", "health_check() returned False")
    db.answer = True
    await checker.check_once()
    assert system.status("db") == ("OK", "Recovered")


async def test_raising_kills_a_tool_with_the_reason_and_true_recovers_it(env: pytest.MonkeyPatch) -> None:
    db = probe("db")
    system = System(db)
    checker = ToolHealthPlugin(system.container)
    db.answer = ConnectionRefusedError("port 5432")
    await checker.check_once()
    assert system.status("db") == ("DEAD", "health_check() raised ConnectionRefusedError: port 5432")
    db.answer = True
    await checker.check_once()
    assert system.status("db") == ("OK", "Recovered")


async def test_a_check_that_hangs_is_dead_after_the_timeout(env: pytest.MonkeyPatch) -> None:
    cache = probe("cache")
    system = System(cache)
    cache.answer = "hang"
    await ToolHealthPlugin(system.container).check_once()
    assert system.status("cache") == ("DEAD", "health_check() did not answer within 0.05s")


async def test_off_tools_and_tools_without_a_check_are_skipped(env: pytest.MonkeyPatch) -> None:
    off, on = probe("off"), probe("on")
    system = System(off, on, Silent())
    system.registry.update_tool_status("off", ToolStatus.OFF, "set OFF_URL")
    assert await ToolHealthPlugin(system.container).check_once() == {"on": "OK"}
    assert (off.calls, on.calls) == (0, 1)
    assert system.status("off") == ("OFF", "set OFF_URL")


async def test_checks_bypass_the_proxy_so_they_are_not_metrics(env: pytest.MonkeyPatch) -> None:
    db = probe("db")
    system = System(db)
    db.answer = RuntimeError("down")
    checker = ToolHealthPlugin(system.container)
    for _ in range(6):
        await checker.check_once()
    assert system.registry.get_metrics() == []


async def test_a_sync_check_runs_off_the_loop(env: pytest.MonkeyPatch) -> None:
    tool = SyncProbe()
    system = System(tool)
    await ToolHealthPlugin(system.container).check_once()
    assert tool.threads and tool.threads[0] != threading.get_ident()
    assert system.status("sync_probe") == ("FAIL", "health_check() returned False")


@pytest.fixture
async def booted(env: pytest.MonkeyPatch) -> AsyncIterator[tuple[ToolHealthPlugin, Probe]]:
    env.setenv("HEALTH_CHECK_INTERVAL", "3600")
    db = probe("db")
    checker = ToolHealthPlugin(System(db).container)
    checker.keel_identity = "system.ToolHealthPlugin"
    await checker.on_boot()
    yield checker, db
    await checker.on_shutdown()


async def test_the_first_pass_runs_at_boot_and_shutdown_stops_the_timer(
    booted: tuple[ToolHealthPlugin, Probe],
) -> None:
    checker, db = booted
    await asyncio.wait_for(db.checked.wait(), 5)
    assert checker.running
    await checker.on_shutdown()
    assert not checker.running
    assert db.calls == 1


@pytest.mark.parametrize("name", ["HEALTH_CHECK_INTERVAL", "HEALTH_CHECK_TIMEOUT"])
def test_intervals_must_be_positive(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "0")
    with pytest.raises(ValueError, match=name):
        ToolHealthPlugin(System().container)


async def test_a_dead_tool_keeps_its_first_reason(env: pytest.MonkeyPatch) -> None:
    db = probe("db")
    system = System(db)
    system.registry.update_tool_status("db", ToolStatus.DEAD, "setup() raised OSError: connection refused")
    db.answer = RuntimeError("still down")
    await ToolHealthPlugin(system.container).check_once()
    assert system.status("db") == ("DEAD", "setup() raised OSError: connection refused")


class HangingSyncProbe(BaseTool):
    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: set[int] = set()

    def health_check(self) -> bool:
        self.threads.add(threading.get_ident())
        self.release.wait(10)
        return True


async def test_a_hung_sync_check_is_not_started_again_so_no_thread_leaks(env: pytest.MonkeyPatch) -> None:
    tool = HangingSyncProbe()
    system = System(tool)
    checker = ToolHealthPlugin(system.container)
    before = threading.active_count()
    try:
        for _ in range(5):
            await checker.check_once()
        assert len(tool.threads) == 1  # one stuck thread, not one per pass
        assert threading.active_count() <= before + 1
        status, message = system.status("hanging")
        assert status == "DEAD" and message is not None
        assert message.startswith("health_check() did not answer within 0.05s")
    finally:
        tool.release.set()
    await until(lambda: threading.active_count() <= before, "the stuck thread ended")
    await checker.check_once()  # the stuck check finished: the next pass asks again, and it recovers
    assert system.status("hanging") == ("OK", "Recovered")


async def test_an_async_check_that_ignores_cancellation_is_abandoned_within_the_bound(
    env: pytest.MonkeyPatch,
) -> None:
    class Stubborn(BaseTool):
        name = "stubborn"

        def __init__(self) -> None:
            self.calls = 0
            self.stop = False

        async def health_check(self) -> bool:
            self.calls += 1
            while not self.stop:
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    continue  # plugin code that swallows cancellation
            return True

    tool = Stubborn()
    system = System(tool)
    checker = ToolHealthPlugin(system.container)
    await asyncio.wait_for(checker.check_once(), 2)
    assert system.status("stubborn")[0] == "DEAD"
    await asyncio.wait_for(checker.check_once(), 2)  # not asked again while it still runs
    assert (system.status("stubborn")[0], tool.calls) == ("DEAD", 1)
    tool.stop = True
    await until(lambda: all(f.done() for f, _ in checker._stuck.values()), "the stubborn check ended")


async def test_a_setup_error_is_kept_next_to_the_health_verdict(env: pytest.MonkeyPatch) -> None:
    db = probe("db")
    system = System(db)
    system.registry.mark_setup_failed("db", "setup() raised OSError: connection refused", permanent=False)
    db.answer = False
    await ToolHealthPlugin(system.container).check_once()
    tool = system.registry.get_system_dump()["tools"]["db"]
    assert (tool["status"], tool["message"]) == ("FAIL", "health_check() returned False")
    assert tool["setup_error"] == "setup() raised OSError: connection refused"
    db.answer = True
    await ToolHealthPlugin(system.container).check_once()
    assert system.registry.get_system_dump()["tools"]["db"]["setup_error"] is None
