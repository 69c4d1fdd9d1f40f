"""The stages a plugin goes through, shared by boot and live reload: construct (with its ``__init__``
parameters injected by name), boot (``on_boot``, bounded), promote, discard, shut down.

What plugin code runs here can only fail that plugin: :data:`PART_FAILURES` are caught, bounded
work that outlives its limit is abandoned, never waited for.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.base_plugin import BasePlugin
from core.base_tool import BaseTool
from core.console import failure_where
from core.container import Container
from core.context import current_identity_var, current_plugin_var
from core.errors import ToolNotConfiguredError, ToolUnavailableError
from core.guard import StepStats, guarded
from core.plugin_tasks import PluginTasks
from core.registry import PluginStatus, Registry, ToolStatus
from core.threads import run_in_daemon_thread

_CORE_DIR = f"{Path(__file__).resolve().parent}{os.sep}"
_KEEL_ROOT = Path(__file__).resolve().parent.parent

log = logging.getLogger("keel.kernel")

CONTAINER_PARAMETER = "container"
TASKS_PARAMETER = "tasks"
RESERVED_PARAMETERS = frozenset({CONTAINER_PARAMETER, TASKS_PARAMETER})
PART_FAILURES = (Exception, SystemExit, KeyboardInterrupt)
"""What plugin or tool code may raise that is that part's failure, never the process's end: a
``sys.exit()`` in an ``on_boot`` marks that plugin DEAD. Cancellation is not among them."""


@dataclass(slots=True)  # no __dict__ each: boot builds one per plugin
class LoadedPlugin:
    """A constructed plugin and where it came from.

    ``owner`` is the value ``current_plugin_var`` held while it was constructed and booted: its
    ``plugin_id`` at boot, a staging owner when it is the new version of a reloaded plugin
    (:mod:`core.reloader`). ``tasks`` exists when the plugin asked for the ``tasks`` parameter.
    """

    plugin_id: str
    domain: str
    instance: BasePlugin
    file: Path
    dependencies: list[str] = field(default_factory=list)
    owner: str = ""
    tasks: PluginTasks | None = None


class PluginLifecycle:
    """What happens to plugins (and the tools' hooks around them) between discovery and shutdown.

    The kernel's boot and the reloader (:mod:`core.reloader`) drive the same stages here, so a
    plugin loaded live is constructed, booted and stopped exactly as one loaded at start-up.
    ``plugins`` are the running plugins by id, ``tools`` the tools in discovery order.
    """

    def __init__(self, container: Container, registry: Registry, relative: Callable[[Path], str]) -> None:
        self.container = container
        self.registry = registry
        self.relative = relative
        self.root = _KEEL_ROOT  # the kernel sets its project root: failures name files under it
        self.plugins: dict[str, LoadedPlugin] = {}
        self.tools: list[BaseTool] = []
        self.boot_timeout = 30.0
        self.tool_timeout = 30.0

    def construct(
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
                file=self.relative(path),
            )
        if missing:
            reason = f"missing required tools: {', '.join(missing)}"
            if staged_owner is None:
                self.registry.update_plugin_status(plugin_id, PluginStatus.DEAD, reason)
                init = getattr(cls.__init__, "__code__", None)
                where = f"{self.relative(path)}:{init.co_firstlineno}" if init else self.relative(path)
                log.error("plugin %s is DEAD: %s (%s)", plugin_id, reason, where)
            return reason
        owner_token = current_plugin_var.set(owner)
        identity_token = current_identity_var.set(f"{plugin_id}.__init__")
        try:
            instance = cls(**kwargs)
        except PART_FAILURES as exc:
            reason = f"__init__ raised {describe(exc)}"
            if staged_owner is None:
                self.registry.update_plugin_status(plugin_id, PluginStatus.DEAD, reason)
            log_failure(plugin_id, "__init__", exc, self.root)
            return reason
        finally:
            current_identity_var.reset(identity_token)
            current_plugin_var.reset(owner_token)
        instance.keel_identity = plugin_id
        return LoadedPlugin(plugin_id, domain, instance, path, dependencies, owner, tasks)

    async def boot(self, plugins: list[LoadedPlugin]) -> None:
        """Boot freshly constructed plugins: READY and serving, or DEAD with what they registered released."""
        if not plugins:
            return
        for plugin, reason in zip(plugins, await self.run_boot_hooks(plugins), strict=True):
            if reason is None:
                self.ready(plugin)  # what admit() does for a plugin that booted, without a coroutine each
            else:
                await self.admit(plugin, reason)

    async def admit(self, plugin: LoadedPlugin, reason: str | None) -> None:
        """Settle a new plugin once its ``on_boot`` ran: with no failure ``reason`` it is READY and
        serving, otherwise DEAD with what it registered released (at boot and at a live load alike)."""
        if reason is None:
            self.ready(plugin)
        else:
            self.registry.update_plugin_status(plugin.plugin_id, PluginStatus.DEAD, reason)
            await self.discard(plugin)

    def ready(self, plugin: LoadedPlugin) -> None:
        self.plugins[plugin.plugin_id] = plugin
        self.registry.update_plugin_status(plugin.plugin_id, PluginStatus.READY)

    async def run_boot_hooks(self, plugins: list[LoadedPlugin]) -> list[str | None]:
        """Run every ``on_boot`` concurrently, all bounded by one ``PLUGIN_BOOT_TIMEOUT`` deadline;
        return each one's failure (``None`` when it booted).

        Each hook runs in its own task whose context carries the plugin's identity and owner.
        One ``asyncio.wait`` for all of them (rather than a timeout scope per plugin) keeps the
        kernel's share of boot small: it is a fixed cost paid for every plugin.
        """
        limit = self.boot_timeout
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[Any]] = []
        stats: list[StepStats] = []
        # Each task copies the context it is created in: set the plugin's identity, create the
        # task, and put the caller's values back once at the end (cheaper than a copy per plugin).
        owner_token = current_plugin_var.set(None)
        identity_token = current_identity_var.set(None)
        try:
            for plugin in plugins:
                plugin_id = plugin.plugin_id
                current_plugin_var.set(plugin.owner)
                current_identity_var.set(f"{plugin_id}.on_boot")
                hook = plugin.instance.on_boot
                # Creating the coroutine runs none of its code; a plain hook is moved to a thread.
                work = hook() if is_coroutine_function(hook) else run_hook(hook)
                stats.append(step_stats := StepStats())
                tasks.append(loop.create_task(guarded(work, f"{plugin_id}.on_boot()", step_stats)))
        finally:
            current_identity_var.reset(identity_token)
            current_plugin_var.reset(owner_token)
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
                log_failure(plugin.plugin_id, "on_boot()", error, self.root)
            else:
                reason = None
            reasons.append(reason)
        return reasons

    async def discard(self, plugin: LoadedPlugin) -> None:
        """A plugin that will not run: release what it registered and stop its background tasks."""
        self.release(plugin.owner)
        if plugin.tasks is not None:
            await plugin.tasks.cancel_all(self.boot_timeout)

    def release(self, owner: str) -> None:
        """Every tool's ``release_owner(owner)``; one that raises is logged and the rest still run."""
        for tool in self.tools:
            release = getattr(tool, "release_owner", None)
            if release is None:
                continue
            try:
                release(owner)
            except Exception:
                log.exception("tool %s: release_owner(%s) raised", tool.name, owner)

    async def shut_down(self, plugin: LoadedPlugin, limit: float) -> None:
        """Run one plugin's ``on_shutdown`` (bounded, failures logged), then stop its tasks."""
        await bounded(
            run_hook(plugin.instance.on_shutdown),
            limit,
            f"{plugin.plugin_id}.on_shutdown",
            owner=plugin.owner,
            root=self.root,
        )
        if plugin.tasks is not None:
            await plugin.tasks.cancel_all(limit)

    async def setup_tool(self, tool: BaseTool, limit: float) -> None:
        """One tool's ``setup()``, bounded by ``limit``: OFF when it is not configured, DEAD when it fails."""
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
            # The registry logs the one line.
            log.debug("tool %s: setup() found its infrastructure unavailable", tool.name, exc_info=exc)
            self.registry.mark_setup_failed(tool.name, f"setup() raised {describe(exc)}", permanent=False)
        except PART_FAILURES as exc:
            # A misconfiguration: a later successful call does not mean it is set up.
            log.debug("tool %s: setup() raised", tool.name, exc_info=exc)
            self.registry.mark_setup_failed(tool.name, f"setup() raised {describe(exc)}")

    def owner_of_file(self, filename: str) -> str | None:
        """The plugin id whose file ``filename`` is (or the file, relative, for another project file)."""
        relative = self.relative(Path(filename))
        if relative == filename or not relative.startswith(("domains" + os.sep, "tools" + os.sep)):
            return None
        for plugin_id, plugin in self.plugins.items():
            if self.relative(plugin.file) == relative:
                return plugin_id
        return relative

    def plugins_of_file(self, path: Path) -> list[LoadedPlugin]:
        """The running plugins defined in ``path``, in the order they were admitted."""
        return [plugin for plugin in self.plugins.values() if plugin.file == path]

    def promote(self, new: LoadedPlugin, running: LoadedPlugin) -> None:
        """Make ``new`` (booted under a staging owner) the running version instead of ``running``:
        every tool swaps their registrations in one step; no await, so a batch of promotions is atomic."""
        plugin_id = new.plugin_id
        for tool in self.tools:
            promote = getattr(tool, "promote_owner", None)
            release = getattr(tool, "release_owner", None)
            try:
                if promote is not None:
                    promote(new.owner, plugin_id)
                    if release is not None and running.owner != plugin_id:
                        release(running.owner)
                elif release is not None:
                    release(running.owner)
            except Exception:
                log.exception("tool %s: handing %s over to its new version raised", tool.name, plugin_id)
        if new.tasks is not None:
            new.tasks.adopt(plugin_id)
        self.plugins[plugin_id] = new
        self.registry.register_plugin(
            plugin_id,
            domain=new.domain,
            class_name=type(new.instance).__name__,
            dependencies=new.dependencies,
            file=self.relative(new.file),
            status=PluginStatus.READY,
        )

    async def retire(self, plugin: LoadedPlugin, *, swapped: bool, drain_timeout: float) -> None:
        """Stop a version that no longer serves: release (unless a swap already did), drain,
        ``on_shutdown``, cancel its tasks, release whatever its shutdown registered."""
        owners = sorted({plugin.plugin_id, plugin.owner})
        if not swapped:
            for owner in owners:
                self.release(owner)
        await self.drain(plugin.plugin_id, owners, drain_timeout)
        await self.shut_down(plugin, self.boot_timeout)
        for owner in owners if not swapped else [o for o in owners if o != plugin.plugin_id]:
            self.release(owner)

    async def drain(self, plugin_id: str, owners: list[str], limit: float) -> None:
        """Wait (at most ``limit`` seconds) for the work in flight under ``owners`` to finish."""
        drains = [
            drain(owner)
            for tool in self.tools
            if callable(drain := getattr(tool, "drain_owner", None))
            for owner in owners
        ]
        if not drains:
            return
        try:
            async with asyncio.timeout(limit):
                results = await asyncio.gather(*drains, return_exceptions=True)
        except TimeoutError:
            log.warning(
                "%s: work still in flight after %gs (PLUGIN_DRAIN_TIMEOUT); shutting it down anyway",
                plugin_id,
                limit,
            )
            return
        for result in results:
            if isinstance(result, Exception):
                log.error("%s: a tool's drain_owner() raised", plugin_id, exc_info=result)

    async def unload(self, plugin: LoadedPlugin, *, drain_timeout: float) -> None:
        """Take a running plugin away: released, drained, shut down, forgotten by the registry."""
        self.plugins.pop(plugin.plugin_id, None)
        await self.retire(plugin, swapped=False, drain_timeout=drain_timeout)
        self.registry.remove_plugin(plugin.plugin_id)

    async def complete_boot(self, tools: list[BaseTool]) -> None:
        """Every tool's ``on_boot_complete``, in order; one that fails is marked DEAD."""
        for tool in tools:
            if not overrides(tool, "on_boot_complete"):
                continue  # BaseTool's does nothing: no task, no timeout (boot is hot)
            await bounded(
                tool.on_boot_complete(self.container),
                self.tool_timeout,
                f"{tool.name}.on_boot_complete",
                on_error=functools.partial(
                    self.registry.update_tool_status, tool.name, ToolStatus.DEAD, log_change=False
                ),
                root=self.root,
            )

    async def notify_changed(self) -> None:
        """Every tool's ``on_plugins_changed``, once after a batch of live changes."""
        for tool in self.tools:
            hook = getattr(tool, "on_plugins_changed", None)
            if callable(hook):
                await bounded(
                    hook(self.container), self.tool_timeout, f"{tool.name}.on_plugins_changed", root=self.root
                )

    async def shut_down_all(self, limit: float) -> None:
        """Plugins' ``on_shutdown`` then tools' ``shutdown``, each in reverse order; failures logged."""
        for plugin_id in reversed(list(self.plugins)):
            await self.shut_down(self.plugins.pop(plugin_id), limit)
        for tool in reversed(self.tools):
            await bounded(tool.shutdown(), limit, f"{tool.name}.shutdown", root=self.root)
        self.tools = []


async def bounded(
    work: Awaitable[Any],
    limit: float,
    identity: str,
    *,
    owner: str | None = None,
    timeout_name: str = "timeout",
    on_error: Callable[[str], None] | None = None,
    root: Path | None = None,
) -> bool:
    """Await ``work`` under an identity and a timeout; report and swallow its failure."""
    owner_token = current_plugin_var.set(owner)
    identity_token = current_identity_var.set(identity)
    try:
        # Its own task, so a hook that swallows the cancellation is abandoned at the bound
        # instead of holding the caller (a shutdown) forever.
        task = asyncio.ensure_future(guarded(work, f"{identity}()"))
    finally:
        current_identity_var.reset(identity_token)
        current_plugin_var.reset(owner_token)
    name = identity.rsplit(".", 1)[-1]
    try:
        done, _ = await asyncio.wait({task}, timeout=limit)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(discard_result)
        raise  # the kernel itself is being cancelled
    if not done:
        task.cancel()
        task.add_done_callback(discard_result)
        reason = f"{name}() did not finish within {limit:g}s ({timeout_name}); abandoned"
        log.error("%s: %s", identity, reason)
    elif task.cancelled():  # the hook raised CancelledError on its own: one failure, the rest run
        reason = f"{name}() was cancelled"
        log.error("%s: %s", identity, reason)
    elif (error := task.exception()) is not None:
        reason = f"{name}() raised {describe(error)}"
        log_failure(identity, f"{name}()", error, root or _KEEL_ROOT)
    else:
        return True
    if on_error is not None:
        on_error(reason)
    return False


def discard_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so an abandoned hook's late failure is not reported as lost


def overrides(tool: BaseTool, hook: str) -> bool:
    """Whether ``tool`` has its own ``hook`` rather than :class:`BaseTool`'s, which does nothing."""
    method = getattr(tool, hook)
    return getattr(method, "__func__", None) is not getattr(BaseTool, hook)


def is_coroutine_function(fn: Callable[..., Any]) -> bool:
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        return bool(code.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(fn)


async def run_hook(fn: Callable[[], Any]) -> Any:
    """Run a plugin hook: ``async def`` is awaited, a plain one runs in its own daemon thread."""
    if is_coroutine_function(fn):
        return await fn()
    result = await run_in_daemon_thread(fn)
    if inspect.isawaitable(result):
        return await result
    return result


def init_parameters(cls: type) -> list[tuple[str, bool]]:
    """``(name, required)`` for each named ``__init__`` parameter after ``self``.

    Reads the code object directly for plain functions (the common case; ``inspect.signature`` was
    a visible share of boot time) and falls back to ``inspect.signature`` for anything else.
    """
    init: Any = cls.__init__  # type: ignore[misc]
    code = getattr(init, "__code__", None)
    if code is None or getattr(init, "__wrapped__", None) is not None:
        if init is object.__init__:
            return []
        return [
            (p.name, p.default is p.empty)
            for p in list(inspect.signature(init).parameters.values())[1:]
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    positional = code.co_varnames[1 : code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    defaults = init.__defaults__ or ()
    kwdefaults = init.__kwdefaults__ or {}
    first_default = len(positional) - len(defaults)
    return [(name, i < first_default) for i, name in enumerate(positional)] + [
        (name, name not in kwdefaults) for name in keyword_only
    ]


def log_failure(who: str, what: str, error: BaseException, root: Path) -> None:
    """One ERROR line: who failed, why, and the file:line to look at; the traceback at DEBUG."""
    where = failure_where(error, root)
    reason = f"{what} raised {type(error).__name__}: {error}"
    log.error("%s: %s%s", who, reason, f" ({where})" if where else "")
    log.debug("%s: the traceback", who, exc_info=error)


def describe(exc: BaseException) -> str:
    """``Type: message`` plus where it happened, short enough for the dump."""
    where = ""
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg} ({Path(exc.filename or '?').name}, line {exc.lineno})"
    else:
        every = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in every if not f.filename.startswith(_CORE_DIR)] or every  # core raises for tools
        if frames:
            last = frames[-1]
            where = f" ({Path(last.filename).name}:{last.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"
