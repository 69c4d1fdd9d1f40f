"""The stages a plugin goes through, shared by boot and live reload: construct (with its ``__init__``
parameters injected by name), boot (``on_boot``, bounded), promote, discard, shut down.

What plugin code runs here can only fail that plugin: :data:`PART_FAILURES` are caught, bounded
work that outlives its limit is abandoned, never waited for.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.base_plugin import BasePlugin
from core.context import current_identity_var, current_plugin_var
from core.guard import guarded
from core.plugin_tasks import PluginTasks
from core.threads import run_in_daemon_thread

log = logging.getLogger("keel.kernel")

CONTAINER_PARAMETER = "container"
TASKS_PARAMETER = "tasks"
RESERVED_PARAMETERS = frozenset({CONTAINER_PARAMETER, TASKS_PARAMETER})
PART_FAILURES = (Exception, SystemExit, KeyboardInterrupt)
"""What plugin or tool code may raise that is that part's failure, never the process's end: a
``sys.exit()`` in an ``on_boot`` marks that plugin DEAD. Cancellation is not among them."""


@dataclass
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


async def bounded(
    work: Awaitable[Any],
    limit: float,
    identity: str,
    *,
    owner: str | None = None,
    timeout_name: str = "timeout",
    on_error: Callable[[str], None] | None = None,
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
        log.error("%s failed", identity, exc_info=error)
    else:
        return True
    if on_error is not None:
        on_error(reason)
    return False


def enter(owner: str, identity: str) -> None:
    current_plugin_var.set(owner)
    current_identity_var.set(identity)


def discard_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so an abandoned hook's late failure is not reported as lost


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


def describe(exc: BaseException) -> str:
    """``Type: message`` plus where it happened, short enough for the dump."""
    where = ""
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg} ({Path(exc.filename or '?').name}, line {exc.lineno})"
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            last = frames[-1]
            where = f" ({Path(last.filename).name}:{last.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"
