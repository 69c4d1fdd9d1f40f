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
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.base_plugin import BasePlugin
from core.base_tool import BaseTool
from core.container import Container
from core.context import current_identity_var, current_plugin_var
from core.discovery import classes_defined_in, python_files, sorted_entries
from core.errors import KernelBootError, ToolNotConfiguredError, ToolUnavailableError
from core.guard import StepStats, guarded
from core.lifecycle import (
    CONTAINER_PARAMETER,
    PART_FAILURES,
    RESERVED_PARAMETERS,
    TASKS_PARAMETER,
    LoadedPlugin,
    bounded,
    describe,
    discard_result,
    enter,
    init_parameters,
    is_coroutine_function,
    run_hook,
)
from core.loader import import_file
from core.plugin_tasks import PluginTasks
from core.registry import Lifecycle, PluginStatus, Registry, ToolStatus
from core.reloader import PluginHost, attach_plugin_host
from core.serving import stop_leftovers
from core.settings import env_float, load_dotenv
from core.watchdog import LoopWatchdog

log = logging.getLogger("keel.kernel")

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Kernel:
    """Boots a project root; ``kernel.run()`` is what ``main.py`` calls."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).resolve() if root is not None else PROJECT_ROOT
        self.registry = Registry()
        self.container = Container(self.registry)
        self.plugins: dict[str, LoadedPlugin] = {}
        self._tool_order: list[BaseTool] = []
        self._booted = False
        self._boot_timeout = 30.0
        self._tool_timeout = 30.0
        self.stop_event: asyncio.Event | None = None
        self.plugin_host = PluginHost(self)
        attach_plugin_host(self.container, self.plugin_host)

    # -- boot ----------------------------------------------------------------------------------

    async def boot(self, *, plugins: bool = True) -> None:
        """Boot the root; ``plugins=False`` sets tools up only (``python main.py migrate``)."""
        load_dotenv(self.root / ".env")
        self.stop_event = asyncio.Event()
        self._tool_timeout = tool_timeout = env_float("TOOL_SETUP_TIMEOUT", 30.0)
        self._boot_timeout = env_float("PLUGIN_BOOT_TIMEOUT", 30.0)
        self.plugin_host.configure()
        self._start_watchdog()
        loop = asyncio.get_running_loop()
        if loop.get_exception_handler() is None:
            loop.set_exception_handler(self._loop_exception)
        tools = self._discover_tools()
        await asyncio.gather(*(self._setup_tool(tool, tool_timeout) for tool in tools))
        if not plugins:
            return
        await self._boot_plugins([p for path in self._plugin_files() for p in self._import_plugins(path)])
        for tool in tools:
            await bounded(
                tool.on_boot_complete(self.container),
                tool_timeout,
                f"{tool.name}.on_boot_complete",
                on_error=functools.partial(self.registry.update_tool_status, tool.name, ToolStatus.DEAD),
            )
        self._booted = True
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

    def _start_watchdog(self) -> None:
        threshold = env_float("LOOP_STALL_THRESHOLD", 1.0)
        if threshold <= 0 or self.registry.watchdog is not None:
            return
        watchdog = LoopWatchdog(
            asyncio.get_running_loop(),
            self._owner_of_file,
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
        owner = self._owner_of_file(code.co_filename) if code is not None else None
        if owner is None or not isinstance(error, BaseException):
            loop.default_exception_handler(context)
            return
        reason = f"a task it created with asyncio.create_task crashed: {type(error).__name__}: {error}"
        log.error("%s: %s (use tasks.start() to have it tracked)", owner, reason, exc_info=error)
        self.registry.set_plugin_degraded(owner, reason)

    def _owner_of_file(self, filename: str) -> str | None:
        """The plugin id whose file ``filename`` is (or the file, relative, for another project file)."""
        relative = self._relative(Path(filename))
        if relative == filename or not relative.startswith(("domains" + os.sep, "tools" + os.sep)):
            return None
        for plugin_id, plugin in self.plugins.items():
            if self._relative(plugin.file) == relative:
                return plugin_id
        return relative

    def _discover_tools(self) -> list[BaseTool]:
        tools_dir = self.root / "tools"
        found: dict[str, tuple[type[BaseTool], Path]] = {}
        for path in python_files(tools_dir):
            relative = self._relative(path)
            try:
                module = import_file(self.root, path)
            except PART_FAILURES as exc:
                self.registry.record_load_error(relative, describe(exc))
                log.error("tool file %s failed to import: %s", relative, describe(exc))
                continue
            for cls in classes_defined_in(module, BaseTool):
                if not cls.name:
                    continue
                if cls.name in RESERVED_PARAMETERS:
                    error = (
                        f"the tool {cls.__name__} may not be named {cls.name!r}: plugins use that "
                        "parameter name for what the kernel itself injects"
                    )
                    self.registry.record_load_error(relative, error)
                    log.error("tool file %s: %s", relative, error)
                    continue
                if cls.name in found and found[cls.name][0] is not cls:
                    # The first file (in sorted order) keeps the name; the other is a load error.
                    first = self._relative(found[cls.name][1])
                    error = f"two tools are named {cls.name!r}: {first} and {relative}; {first} was loaded"
                    self.registry.record_load_error(relative, error)
                    log.error("tool file %s: %s", relative, error)
                    continue
                found[cls.name] = (cls, path)
        tools: list[BaseTool] = []
        for name, (cls, path) in found.items():
            relative = self._relative(path)
            try:
                tool = cls()
            except PART_FAILURES as exc:
                self.registry.register_tool(
                    name, ToolStatus.DEAD, f"constructor raised {describe(exc)}", relative
                )
                log.exception("tool %s could not be constructed", name)
                continue
            self.registry.register_tool(name, ToolStatus.OK, None, relative)
            tool.bind(project_root=self.root, registry=self.registry)
            self.container.add(tool)
            tools.append(tool)
        self._tool_order = tools
        return tools

    async def _setup_tool(self, tool: BaseTool, limit: float) -> None:
        try:
            async with asyncio.timeout(limit):
                await tool.setup()
        except ToolNotConfiguredError as exc:
            self.registry.update_tool_status(tool.name, ToolStatus.OFF, str(exc))
        except TimeoutError:
            reason = f"setup() timed out after {limit:g}s (TOOL_SETUP_TIMEOUT)"
            self.registry.mark_setup_failed(tool.name, reason)
        except ToolUnavailableError as exc:
            # Its infrastructure is unreachable: the tool reconnects by itself, and its first
            # successful call (or health check) marks it OK again.
            log.error("tool %s: setup() found its infrastructure unavailable: %s", tool.name, exc)
            self.registry.mark_setup_failed(tool.name, f"setup() raised {describe(exc)}", permanent=False)
        except PART_FAILURES as exc:
            # A misconfiguration: a later successful call does not mean it is set up.
            log.exception("tool %s: setup() raised", tool.name)
            self.registry.mark_setup_failed(tool.name, f"setup() raised {describe(exc)}")

    def _plugin_files(self) -> list[Path]:
        """``domains/*/plugins/*.py`` (not ``_private.py``), sorted by domain then file name.

        Listed with ``os.scandir`` and sorted as strings: ``Path.glob`` and sorting ``Path``
        objects were a visible share of booting a root with a hundred plugins."""
        domains = os.path.join(self.root, "domains")
        found: list[Path] = []
        for domain in sorted_entries(domains, directories=True):
            plugins = os.path.join(domains, domain, "plugins")
            found.extend(
                Path(plugins, name)
                for name in sorted_entries(plugins, directories=False)
                if name.endswith(".py") and not name.startswith("_")
            )
        return found

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

    async def unload_plugin_file(self, path: Path) -> None:
        """Unload every plugin of one file and forget the file (it was deleted)."""
        await self.plugin_host.unload_file(path)

    def _import_plugins(self, path: Path) -> list[LoadedPlugin]:
        """Import one plugin file and construct its plugins (a failure is recorded, not raised)."""
        module, _ = self._import_module(path)
        if module is None:
            return []
        domain = path.parent.parent.name
        return [
            plugin
            for cls in classes_defined_in(module, BasePlugin)
            if isinstance(plugin := self._construct(cls, domain, path), LoadedPlugin)
        ]

    def _import_module(self, path: Path, *, fresh: bool = False) -> tuple[Any, str | None]:
        """``(module, None)``, or ``(None, error)`` with the error recorded as the file's load error."""
        relative = self._relative(path)
        try:
            module = import_file(self.root, path, fresh=fresh)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            error = describe(exc)
            self.registry.record_load_error(relative, error)
            log.error("plugin file %s failed to import: %s", relative, error)
            return None, error
        self.registry.clear_load_error(relative)
        return module, None

    def _construct(
        self, cls: type[BasePlugin], domain: str, path: Path, *, staged_owner: str | None = None
    ) -> LoadedPlugin | str:
        """Inject and construct one plugin; on failure return the reason.

        Normally the plugin is (re)registered in the registry and a failure makes it DEAD. With a
        ``staged_owner`` it is the new version of a running plugin: the registry is left to the
        running version, and the caller decides what a failure means.
        """
        plugin_id = f"{domain}.{cls.__name__}"
        owner = staged_owner or plugin_id
        kwargs: dict[str, Any] = {}
        missing: list[str] = []
        dependencies: list[str] = []
        tasks: PluginTasks | None = None
        for name, required in init_parameters(cls):
            dependencies.append(name)
            if name == CONTAINER_PARAMETER:
                kwargs[name] = self.container
            elif name == TASKS_PARAMETER:
                kwargs[name] = tasks = PluginTasks(
                    plugin_id,
                    asyncio.get_running_loop(),
                    owner=owner,
                    on_failure=functools.partial(self.registry.set_plugin_degraded, plugin_id),
                )
            elif self.container.has(name):
                kwargs[name] = self.container.get(name)
            elif required:
                missing.append(name)
        if staged_owner is None:
            self.registry.register_plugin(
                plugin_id,
                domain=domain,
                class_name=cls.__name__,
                dependencies=dependencies,
                file=self._relative(path),
            )
        if missing:
            reason = f"missing required tools: {', '.join(missing)}"
            if staged_owner is None:
                self.registry.update_plugin_status(plugin_id, PluginStatus.DEAD, reason)
                log.error("plugin %s is DEAD: %s", plugin_id, reason)
            return reason
        owner_token = current_plugin_var.set(owner)
        identity_token = current_identity_var.set(f"{plugin_id}.__init__")
        try:
            instance = cls(**kwargs)
        except PART_FAILURES as exc:
            reason = f"__init__ raised {describe(exc)}"
            if staged_owner is None:
                self.registry.update_plugin_status(plugin_id, PluginStatus.DEAD, reason)
            log.exception("plugin %s: __init__ raised", plugin_id)
            return reason
        finally:
            current_identity_var.reset(identity_token)
            current_plugin_var.reset(owner_token)
        instance.keel_identity = plugin_id
        return LoadedPlugin(plugin_id, domain, instance, path, dependencies, owner, tasks)

    async def _boot_plugins(self, plugins: list[LoadedPlugin]) -> None:
        """Boot freshly constructed plugins: READY and serving, or DEAD with what they registered released."""
        if not plugins:
            return
        for plugin, reason in zip(plugins, await self._run_boot_hooks(plugins), strict=True):
            if reason is None:
                self.plugins[plugin.plugin_id] = plugin
                self.registry.update_plugin_status(plugin.plugin_id, PluginStatus.READY)
            else:
                self.registry.update_plugin_status(plugin.plugin_id, PluginStatus.DEAD, reason)
                await self._discard(plugin)

    async def _run_boot_hooks(self, plugins: list[LoadedPlugin]) -> list[str | None]:
        """Run every ``on_boot`` concurrently, all bounded by one ``PLUGIN_BOOT_TIMEOUT`` deadline;
        return each one's failure (``None`` when it booted).

        Each hook runs in its own task whose context carries the plugin's identity and owner.
        One ``asyncio.wait`` for all of them (rather than a timeout scope per plugin) keeps the
        kernel's share of boot small: it is a fixed cost paid for every plugin.
        """
        limit = self._boot_timeout
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[Any]] = []
        stats: list[StepStats] = []
        for plugin in plugins:
            context = contextvars.copy_context()
            context.run(enter, plugin.owner, f"{plugin.plugin_id}.on_boot")
            hook = plugin.instance.on_boot
            # Creating the coroutine runs none of its code; a plain hook is moved to a thread.
            work = hook() if is_coroutine_function(hook) else run_hook(hook)
            stats.append(step_stats := StepStats())
            where = f"{plugin.plugin_id}.on_boot()"
            tasks.append(asyncio.create_task(guarded(work, where, step_stats), context=context))
        # One deadline for all, moved on by the time hooks held the loop in long steps: a hook
        # that blocks the loop for 20 s must not make the others, which could not run meanwhile,
        # miss the deadline. The blocker itself is blamed below.
        deadline = loop.time() + limit
        pending: set[asyncio.Task[Any]] = set(tasks)
        while pending:
            remaining = deadline + sum(s.held for s in stats) - loop.time()
            if remaining <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=remaining)
        for task in pending:
            task.cancel()  # a hook that ignores cancellation is abandoned, never waited for
            task.add_done_callback(discard_result)
        reasons: list[str | None] = []
        for task, plugin, step in zip(tasks, plugins, stats, strict=True):
            if step.longest > limit:
                reason: str | None = (
                    f"on_boot() blocked the event loop for {step.longest:.1f}s in one step, longer than "
                    f"PLUGIN_BOOT_TIMEOUT ({limit:g}s): blocking calls in async code stall every request "
                    "(use a plain def, or asyncio.to_thread)"
                )
                log.error("%s: %s", plugin.plugin_id, reason)
            elif task in pending:
                reason = f"on_boot() did not finish within {limit:g}s (PLUGIN_BOOT_TIMEOUT)"
                log.error("%s: %s", plugin.plugin_id, reason)
            elif task.cancelled():  # the hook raised CancelledError itself: its failure, nobody else's
                reason = "on_boot() was cancelled"
                log.error("%s: %s", plugin.plugin_id, reason)
            elif (error := task.exception()) is not None:
                reason = f"on_boot() raised {describe(error)}"
                log.error("%s.on_boot failed", plugin.plugin_id, exc_info=error)
            else:
                reason = None
            reasons.append(reason)
        return reasons

    def _plugin_classes(self, module: Any) -> list[type[BasePlugin]]:
        return classes_defined_in(module, BasePlugin)

    async def _shut_down(self, plugin: LoadedPlugin, limit: float) -> None:
        """Run one plugin's ``on_shutdown`` (bounded, failures logged), then stop its tasks."""
        await bounded(
            run_hook(plugin.instance.on_shutdown),
            limit,
            f"{plugin.plugin_id}.on_shutdown",
            owner=plugin.owner,
        )
        if plugin.tasks is not None:
            await plugin.tasks.cancel_all(limit)

    async def _discard(self, plugin: LoadedPlugin) -> None:
        """A plugin that will not run: release what it registered and stop its background tasks."""
        self._release(plugin.owner)
        if plugin.tasks is not None:
            await plugin.tasks.cancel_all(self._boot_timeout)

    def _release(self, owner: str) -> None:
        for tool in self._tool_order:
            release = getattr(tool, "release_owner", None)
            if release is None:
                continue
            try:
                release(owner)
            except Exception:
                log.exception("tool %s: release_owner(%s) raised", tool.name, owner)

    def _relative(self, path: Path) -> str:
        """``path`` relative to the root, as the dump names files (string slicing: boot is hot)."""
        text, prefix = str(path), f"{self.root}{os.sep}"
        return text[len(prefix) :] if text.startswith(prefix) else text

    # -- running and stopping ------------------------------------------------------------------

    async def serve(self) -> bool:
        """Run every tool's ``serve(stop)`` until the stop event is set and they have drained.

        Returns False when a tool's ``serve()`` failed (its port was taken, say): the process then
        exits non-zero instead of pretending it served."""
        if self.stop_event is None:
            raise RuntimeError("boot() the kernel before serving it")
        servers = [
            tool.serve(self.stop_event)  # type: ignore[attr-defined]
            for tool in self._tool_order
            if callable(getattr(tool, "serve", None))
            and self.registry.tool_status(tool.name) in (ToolStatus.OK, ToolStatus.FAIL)
        ]
        if not servers:
            await self.stop_event.wait()
            return True
        tasks = [asyncio.ensure_future(server) for server in servers]
        for task in tasks:
            task.add_done_callback(self._stop_if_failed)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failures = [result for result in results if isinstance(result, BaseException)]
        for failure in failures:
            log.error("a tool's serve() failed", exc_info=failure)
        return not failures

    def _stop_if_failed(self, task: asyncio.Future[Any]) -> None:
        """One server failing stops the others: half a service (a watcher, no HTTP) is not served."""
        if not task.cancelled() and task.exception() is not None:
            self.request_stop()

    def request_stop(self) -> None:
        self.registry.lifecycle = Lifecycle.DRAINING
        if self.stop_event is not None:
            self.stop_event.set()

    async def shutdown(self) -> None:
        """Plugins' ``on_shutdown`` then tools' ``shutdown`` in reverse order; failures are logged."""
        self.request_stop()
        await self.plugin_host.close()
        timeout = env_float("SHUTDOWN_TIMEOUT", 10.0)
        for plugin_id in reversed(list(self.plugins)):
            await self._shut_down(self.plugins.pop(plugin_id), timeout)
        for tool in reversed(self._tool_order):
            await bounded(tool.shutdown(), timeout, f"{tool.name}.shutdown")
        self._tool_order = []
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
        factory = next((t.loop_factory for t in self._tool_classes() if t.loop_factory), None)
        with asyncio.Runner(loop_factory=factory) as runner:
            code = runner.run(self._main(serve=command == "serve"))
            abandoned = runner.run(stop_leftovers(env_float("SHUTDOWN_TIMEOUT", 10.0)))
            if abandoned:
                # Closing the runner would wait for them forever: exit now, saying what is left.
                log.error("exiting with work that ignored cancellation abandoned: %s", ", ".join(abandoned))
                logging.shutdown()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        return code

    async def _main(self, *, serve: bool) -> int:
        loop = asyncio.get_running_loop()
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
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.request_stop)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
                signal.signal(sig, lambda *_: loop.call_soon_threadsafe(self.request_stop))
        served = False
        try:
            served = await self.serve()
        finally:
            await self.shutdown()
        return 0 if served else 1

    def _tool_classes(self) -> Iterable[type[BaseTool]]:
        """Tool classes, imported without constructing them (to choose the event loop)."""
        tools_dir = self.root / "tools"
        for path in python_files(tools_dir):
            try:
                module = import_file(self.root, path)
            except Exception:
                continue  # boot reports it
            yield from classes_defined_in(module, BaseTool)


def main() -> None:  # pragma: no cover - exercised through main.py
    sys.exit(Kernel().run())
