"""The Kernel: discovers tools and plugins under a project root, wires them, runs and stops them.

Boot: tools (``tools/**/*.py``, every ``BaseTool`` subclass) are constructed and set up
concurrently, each bounded by ``TOOL_SETUP_TIMEOUT``; plugins (``domains/*/plugins/*.py``) get
their ``__init__`` parameters injected by name and their ``on_boot`` run concurrently, each bounded
by ``PLUGIN_BOOT_TIMEOUT``; then every tool's ``on_boot_complete``. Any failure marks only that tool
or plugin DEAD (or records the file's load error) and boot goes on. The kernel knows no tool by
name: serving is whatever tools implement ``serve(stop)``.

Two ``__init__`` parameter names are the kernel's own, and no tool may take them: ``container``
injects the Container, ``tasks`` a :class:`~core.plugin_tasks.PluginTasks` for background tasks
that stop when the plugin goes away.

After boot, plugin files can be loaded, reloaded and unloaded while the service runs: the kernel's
:class:`~core.reloader.PluginHost` (``kernel.plugin_host``) does it, one file at a time, and is
what the ``plugin_watcher`` tool drives; see :mod:`core.reloader` for the rules.

The kernel composes the parts that do the work: :class:`~core.discovery.Discovery` (which files
and classes there are), :class:`~core.lifecycle.PluginLifecycle` (construct, inject, boot,
promote, discard and shut down, shared by boot and live reload) and :mod:`core.serving` (the
tools' servers, signals, the process's end).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from pathlib import Path
from typing import Any

from core import serving
from core.container import Container
from core.discovery import Discovery
from core.errors import KernelBootError
from core.lifecycle import (
    CONTAINER_PARAMETER,
    PART_FAILURES,
    RESERVED_PARAMETERS,
    TASKS_PARAMETER,
    LoadedPlugin,
    PluginLifecycle,
    overrides,
)
from core.registry import Lifecycle, Registry
from core.reloader import PluginHost, attach_plugin_host
from core.settings import env_float, load_dotenv
from core.watchdog import LoopWatchdog

__all__ = [
    "CONTAINER_PARAMETER",
    "PART_FAILURES",
    "PROJECT_ROOT",
    "RESERVED_PARAMETERS",
    "TASKS_PARAMETER",
    "Kernel",
    "LoadedPlugin",
    "main",
]

log = logging.getLogger("keel.kernel")

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Kernel:
    """Boots a project root; ``kernel.run()`` is what ``main.py`` calls."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).resolve() if root is not None else PROJECT_ROOT
        self.registry = Registry()
        self.container = Container(self.registry)
        self.discovery = Discovery(self.root, self.registry, self.container)
        self.lifecycle = PluginLifecycle(self.container, self.registry, self.discovery.relative)
        self.lifecycle.root = self.root
        self.plugins: dict[str, LoadedPlugin] = self.lifecycle.plugins
        self.stop_event: asyncio.Event | None = None
        self.plugin_host = PluginHost(self)
        attach_plugin_host(self.container, self.plugin_host)

    # -- boot ----------------------------------------------------------------------------------

    async def boot(self, *, plugins: bool = True) -> None:
        """Boot the root; ``plugins=False`` sets tools up only (``python main.py migrate``).

        The cyclic garbage collector is paused meanwhile (and put back as it was): nearly all that
        boot allocates — modules, classes, proxies, plugins — lives as long as the process, so the
        collections its allocations would trigger traverse the whole young heap to free nothing.
        They were a sixth of the kernel's instructions at boot. Plain reference counting still frees
        what boot drops, so only garbage in cycles waits, for the first collection after boot.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            await self._boot(plugins=plugins)
        finally:
            if collecting:
                gc.enable()

    async def _boot(self, *, plugins: bool) -> None:
        load_dotenv(self.root / ".env")
        self.stop_event = asyncio.Event()
        lifecycle = self.lifecycle
        lifecycle.tool_timeout = tool_timeout = env_float("TOOL_SETUP_TIMEOUT", 30.0)
        lifecycle.boot_timeout = env_float("PLUGIN_BOOT_TIMEOUT", 30.0)
        self.plugin_host.configure()
        self._start_watchdog()
        loop = asyncio.get_running_loop()
        if loop.get_exception_handler() is None:
            loop.set_exception_handler(self._loop_exception)
        lifecycle.tools = tools = self.discovery.discover_tools()
        await asyncio.gather(
            *(lifecycle.setup_tool(tool, tool_timeout) for tool in tools if overrides(tool, "setup"))
        )
        if not plugins:
            return
        await lifecycle.boot(
            [p for path in self.discovery.plugin_files() for p in self._import_plugins(path)]
        )
        await lifecycle.complete_boot(tools)
        if not self.stop_event.is_set():
            self.registry.lifecycle = Lifecycle.SERVING
        if log.isEnabledFor(logging.INFO):
            counts = self.registry.counts()
            log.info(
                "booted %s: %d tools, %d plugins (%d dead), %d files failed to load",
                self.root,
                counts["tools"],
                counts["plugins"],
                counts["dead_plugins"],
                counts["load_errors"],
            )

    def _import_plugins(self, path: Path) -> list[LoadedPlugin]:
        """Import one plugin file and construct its plugins (a failure is recorded, not raised)."""
        module, _ = self.discovery.import_module(path)
        if module is None:
            return []
        domain = path.parts[-3]  # domains/<domain>/plugins/<file>.py
        return [
            plugin
            for cls in self.discovery.plugin_classes(module)
            if isinstance(plugin := self.lifecycle.construct(cls, domain, path), LoadedPlugin)
        ]

    def _start_watchdog(self) -> None:
        threshold = env_float("LOOP_STALL_THRESHOLD", 1.0)
        if threshold <= 0 or self.registry.watchdog is not None:
            return
        watchdog = LoopWatchdog(
            asyncio.get_running_loop(),
            self.lifecycle.owner_of_file,
            threshold=threshold,
            liveness=env_float("LOOP_STALL_LIVENESS", 10.0),
            rss_every=env_float("RSS_SAMPLE_SECONDS", 10.0) or 10.0,
        )
        watchdog.start()
        self.registry.watchdog = watchdog

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A raw ``asyncio.create_task`` of plugin code crashed and nobody awaited it: log it with the
        plugin's name and mark the plugin degraded; anything else goes to asyncio's default handler."""
        task = context.get("future") or context.get("task")
        error = context.get("exception")
        code = getattr(getattr(task, "get_coro", lambda: None)(), "cr_code", None)
        owner = self.lifecycle.owner_of_file(code.co_filename) if code is not None else None
        if owner is None or not isinstance(error, BaseException):
            loop.default_exception_handler(context)
            return
        reason = f"a task it created with asyncio.create_task crashed: {type(error).__name__}: {error}"
        log.error("%s: %s (use tasks.start() to have it tracked)", owner, reason, exc_info=error)
        self.registry.set_plugin_degraded(owner, reason)

    # -- plugins, one file at a time (also the unit of live reload) ----------------------------

    async def load_plugin_file(self, path: Path, *, fresh: bool = False) -> list[LoadedPlugin]:
        """Import one plugin file, construct and boot its plugins; return those that were built.

        A plugin of the file that is already running is replaced the way a live reload replaces it
        (:mod:`core.reloader`): the new version boots first, and takes over only if it boots.
        """
        return await self.plugin_host.load_file(path, fresh=fresh)

    async def unload_plugin(self, plugin_id: str) -> None:
        """Release what one plugin registered, let its in-flight requests finish, shut it down."""
        await self.plugin_host.unload_plugin(plugin_id)

    # -- running and stopping ------------------------------------------------------------------

    async def serve(self) -> bool:
        """Run every tool's ``serve(stop)`` until the stop event is set and they have drained.

        Returns False when a tool's ``serve()`` failed (its port was taken, say): the process then
        exits non-zero instead of pretending it served."""
        if self.stop_event is None:
            raise RuntimeError("boot() the kernel before serving it")
        return await serving.serve(self.lifecycle.tools, self.registry, self.stop_event, self.request_stop)

    def request_stop(self) -> None:
        self.registry.lifecycle = Lifecycle.DRAINING
        if self.stop_event is not None:
            self.stop_event.set()

    async def shutdown(self) -> None:
        """Plugins' ``on_shutdown`` then tools' ``shutdown`` in reverse order; failures are logged."""
        self.request_stop()
        await self.plugin_host.close()
        await self.lifecycle.shut_down_all(env_float("SHUTDOWN_TIMEOUT", 10.0))
        if self.registry.watchdog is not None:
            self.registry.watchdog.stop()
        log.info("shut down %s", self.root)

    def run(self, argv: list[str] | None = None) -> int:
        """The process: ``[]`` boots and serves until SIGINT/SIGTERM; ``["migrate"]`` sets the tools
        up (which applies migrations) and stops. Returns the exit code, 0 on a clean stop."""
        command = (argv or ["serve"])[0]
        if command not in ("serve", "migrate"):
            print(f"unknown command {command!r}; use: main.py [serve|migrate]", file=sys.stderr)
            return 2
        factory = next((t.loop_factory for t in self.discovery.tool_classes() if t.loop_factory), None)
        return serving.run_process(lambda: self._main(serve=command == "serve"), factory)

    async def _main(self, *, serve: bool) -> int:
        try:
            await self.boot(plugins=serve)
        except KernelBootError as exc:
            log.critical("boot failed: %s", exc)
            return 1
        if not serve:
            await self.shutdown()
            dead = {
                n: t for n, t in self.registry.get_system_dump()["tools"].items() if t["status"] == "DEAD"
            }
            for name, tool in dead.items():
                print(f"{name}: DEAD: {tool['message']}", file=sys.stderr)
            return 1 if dead else 0
        # What boot built stays for the life of the process: out of the collector's sight, its
        # full collections while serving no longer traverse it (and a forked worker's pages of it
        # are not dirtied by the collector's bookkeeping).
        gc.freeze()
        serving.stop_on_signals(self.request_stop)
        served = False
        try:
            served = await self.serve()
        finally:
            await self.shutdown()
        return 0 if served else 1


def main() -> None:  # pragma: no cover - exercised through main.py
    sys.exit(Kernel().run())
