"""Background tasks a plugin starts through the kernel, so unloading the plugin stops them.

A plugin asks for them by naming an ``__init__`` parameter ``tasks`` (a reserved name, like
``container``) and calls ``self.tasks.start(self.poll())``. Each task:

- runs with ``current_plugin_var`` set to the plugin's owner (``<domain>.<Class>``, or its staging
  owner while a new version boots, switched to ``<domain>.<Class>`` when it is promoted) and
  ``current_identity_var`` to ``<domain>.<Class>.<coroutine name>``, so what it logs is attributed
  to the plugin and what it registers belongs to it;
- is logged with that identity if it fails (a task nobody awaits must not fail silently), and
  its plugin is marked degraded in the dump with the error (the plugin stays READY: its routes
  may still work, but what the task did no longer happens);
- is cancelled when its plugin is unloaded, replaced by a reload, or fails to boot, after the
  plugin's ``on_shutdown`` had its chance to stop it gracefully. The kernel waits for the
  cancelled tasks within a bound; one that ignores cancellation is abandoned, not waited for.

``start`` may be called on the event loop (an ``async`` hook or handler) or from a worker thread
(a plain ``def on_boot``): from a thread, creating the task is handed to the loop and ``start``
returns once the task exists.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from core.context import current_identity_var, current_plugin_var
from core.guard import guarded

log = logging.getLogger("keel.kernel")

THREAD_HANDOFF_TIMEOUT = 30.0
"""How long ``start`` called from a worker thread waits for the loop to create the task."""


class PluginTasks:
    """The tracked background tasks of one plugin instance."""

    def __init__(
        self,
        plugin_id: str,
        loop: asyncio.AbstractEventLoop,
        *,
        owner: str | None = None,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.plugin_id = plugin_id
        self.on_failure = on_failure
        """Told why, when a task crashes (the kernel marks the plugin degraded)."""
        self.owner = owner or plugin_id
        self._loop = loop
        self._tasks: dict[asyncio.Task[Any], contextvars.Context] = {}
        self._closed = False

    def start(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a task owned by this plugin; it is cancelled when the plugin goes away."""
        if not asyncio.iscoroutine(coro):
            raise TypeError(f"tasks.start() takes a coroutine, got {type(coro).__name__}")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return self._spawn(coro, name)
        handoff: concurrent.futures.Future[asyncio.Task[Any]] = concurrent.futures.Future()

        def spawn_on_loop() -> None:
            try:
                handoff.set_result(self._spawn(coro, name))
            except BaseException as exc:  # handed back to the calling thread
                handoff.set_exception(exc)

        try:
            self._loop.call_soon_threadsafe(spawn_on_loop)
        except RuntimeError:
            coro.close()
            raise RuntimeError(f"{self.plugin_id}: the event loop is closed; no task was started") from None
        return handoff.result(timeout=THREAD_HANDOFF_TIMEOUT)

    def adopt(self, owner: str) -> None:
        """The plugin now registers as ``owner`` (a new version was promoted): so do its tasks.

        A task started while its version was staged registered under the staging owner; what it
        registers from now on must belong to the promoted plugin, or the next swap would drop it.
        Called on the loop thread, where every task is suspended, so each task's own context can be
        updated in place."""
        self.owner = owner
        for context in self._tasks.values():
            context.run(current_plugin_var.set, owner)

    @property
    def running(self) -> int:
        """How many of the plugin's tasks have not finished yet."""
        return len(self._tasks)

    async def cancel_all(self, limit: float) -> None:
        """Refuse new tasks, cancel the running ones and wait for them, at most ``limit`` seconds."""
        self._closed = True
        tasks = list(self._tasks)
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        _, pending = await asyncio.wait(tasks, timeout=limit)
        for task in pending:
            log.error(
                "%s: background task %s ignored cancellation; abandoned", self.plugin_id, task.get_name()
            )

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str | None) -> asyncio.Task[Any]:
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.plugin_id} is unloaded; it cannot start background tasks")
        label = getattr(coro, "__name__", "task")
        context = contextvars.copy_context()
        context.run(_enter, self.owner, f"{self.plugin_id}.{label}")
        identity = name or f"{self.plugin_id}.{label}"
        # guarded: a SystemExit in the task is the task's failure, not the end of the process
        task = self._loop.create_task(guarded(coro, identity), name=identity, context=context)
        self._tasks[task] = context
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("%s: background task %s failed", self.plugin_id, task.get_name(), exc_info=error)
            if self.on_failure is not None:
                self.on_failure(f"background task {task.get_name()} crashed: {type(error).__name__}: {error}")


def _enter(owner: str, identity: str) -> None:
    current_plugin_var.set(owner)
    current_identity_var.set(identity)
