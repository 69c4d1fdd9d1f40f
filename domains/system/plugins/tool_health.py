"""ToolHealthPlugin: asks every tool that can tell whether it is healthy, on a timer.

Every ``HEALTH_CHECK_INTERVAL`` seconds (default 30; the first pass runs at boot) each tool that
defines ``health_check()`` and is not OFF is asked, concurrently, each answer bounded by
``HEALTH_CHECK_TIMEOUT`` seconds (default 5):

- ``True`` keeps the tool as it is, or brings a FAIL or DEAD tool back to OK ("Recovered");
- ``False`` (or any falsy answer) marks it FAIL;
- raising, or not answering in time, marks it DEAD with the reason.

A check that did not answer in time is not asked again while it is still running: a plain
``def health_check`` stuck in its thread keeps the tool DEAD ("has not answered for Ns") rather
than starting one more thread every interval, and an async one is cancelled and abandoned if it
ignores the cancellation. A tool whose ``setup()`` failed keeps that reason in the dump's
``setup_error`` whatever the checks say afterwards.

The checks call the raw tools from the container, bypassing the ToolProxy, so a health check is
neither a metric nor counted by the proxy's failure streak; statuses are written straight to the
kernel's registry, only when they change (a tool that is DEAD already keeps its first reason,
say why its setup failed). ``check_once()`` runs one pass (tests call it instead of waiting for
the timer). A plain ``def health_check`` runs in its own daemon thread.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from core import BasePlugin, Container, ToolStatus
from core.context import bound, current_identity_var
from core.settings import env_float
from core.threads import run_in_daemon_thread

RECOVERED = "Recovered"
UNHEALTHY = frozenset({ToolStatus.FAIL, ToolStatus.DEAD})


class ToolHealthPlugin(BasePlugin):
    def __init__(self, container: Container) -> None:
        self.container = container
        self.interval = env_float("HEALTH_CHECK_INTERVAL", 30.0)
        self.timeout = env_float("HEALTH_CHECK_TIMEOUT", 5.0)
        if self.interval <= 0 or self.timeout <= 0:
            raise ValueError("HEALTH_CHECK_INTERVAL and HEALTH_CHECK_TIMEOUT must be positive")
        self._task: asyncio.Task[None] | None = None
        self._stuck: dict[str, tuple[asyncio.Future[Any], float]] = {}
        """Checks that overran their timeout and are still running, with when they started."""

    async def on_boot(self) -> None:
        self._task = asyncio.create_task(self._run(), name="keel-tool-health")

    async def on_shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    @property
    def running(self) -> bool:
        """Whether the periodic checks are scheduled (between ``on_boot`` and ``on_shutdown``)."""
        return self._task is not None and not self._task.done()

    async def check_once(self) -> dict[str, str]:
        """Check every tool that has ``health_check`` once; returns ``{tool: status}`` afterwards."""
        registry = self.container.registry
        checks = {
            name: check
            for name, tool in self.container.get_raw_tools().items()
            if callable(check := getattr(tool, "health_check", None))
            and registry.tool_status(name) is not ToolStatus.OFF
        }
        await asyncio.gather(*(self._check(name, check) for name, check in checks.items()))
        return {name: str(registry.tool_status(name)) for name in checks}

    async def _run(self) -> None:
        with bound(current_identity_var, f"{self.keel_identity or type(self).__name__}.check_once"):
            while True:
                await self.check_once()
                await asyncio.sleep(self.interval)

    async def _check(self, name: str, check: Any) -> None:
        loop = asyncio.get_running_loop()
        stuck = self._stuck.get(name)
        if stuck is not None:
            if not stuck[0].done():
                waited = loop.time() - stuck[1]
                self._set(name, ToolStatus.DEAD, f"health_check() has not answered for {waited:.0f}s")
                return
            del self._stuck[name]
        started = loop.time()
        is_async = inspect.iscoroutinefunction(check)
        running: asyncio.Future[Any] = asyncio.ensure_future(
            check() if is_async else run_in_daemon_thread(check)
        )
        done, _ = await asyncio.wait({running}, timeout=self.timeout)
        if not done:
            if is_async:
                running.cancel()  # a thread cannot be stopped: it is only never started twice
            running.add_done_callback(_retrieve)
            self._stuck[name] = (running, started)
            self._set(name, ToolStatus.DEAD, f"health_check() did not answer within {self.timeout:g}s")
            return
        try:
            healthy = running.result()
            if inspect.isawaitable(healthy):
                healthy = await asyncio.wait_for(healthy, self.timeout)
        except asyncio.CancelledError:
            self._set(name, ToolStatus.DEAD, "health_check() was cancelled")
        except Exception as exc:
            self._set(name, ToolStatus.DEAD, f"health_check() raised {type(exc).__name__}: {exc}")
        else:
            if not healthy:
                self._set(name, ToolStatus.FAIL, "health_check() returned False")
            elif self.container.registry.tool_status(name) in UNHEALTHY:
                self._set(name, ToolStatus.OK, RECOVERED)

    def _set(self, name: str, status: ToolStatus, message: str) -> None:
        registry = self.container.registry
        if registry.tool_status(name) is not status:  # the same verdict again keeps the first reason
            registry.update_tool_status(name, status, message)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # a late failure of an abandoned check is not "never retrieved"
