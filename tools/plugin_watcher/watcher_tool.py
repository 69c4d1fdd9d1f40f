"""The ``plugin_watcher`` tool: plugin files added, changed, deleted or renamed take effect live.

With ``PLUGINS_WATCH=1`` (``make run`` sets it; it is off otherwise, and the tool is then OFF) it
watches ``domains/`` with ``watchfiles`` while the service runs, and hands every batch of changed
paths to the kernel's plugin host (:mod:`core.reloader`), which loads new plugin files, reloads
changed ones (the new version boots before it replaces the old one) and unloads deleted ones.

Why a tool: ``core`` imports only the standard library, so the file watching lives here while the
reload mechanics stay in the kernel. The tool reaches them through the container it is handed in
``on_boot_complete`` (``core.reloader.plugin_host(container)``) and runs its loop as ``serve(stop)``,
so it starts after boot and stops with the service. Whether watching is on, what it watches and
what the last batches did is a kernel capability in the system dump:
``kernel.capabilities.plugin_watch``.

Batches: a change opens a batch that closes once the tree has been quiet for
``PLUGINS_WATCH_STEP_MS`` (default 50) or at most ``PLUGINS_WATCH_DEBOUNCE_MS`` (default 1600)
after it opened, so an editor's save (a temporary file, a rename) or a ``git checkout`` touching
many files is applied as one batch. The host looks at what is on disk when it applies a batch,
not at the kind of event, so an atomic save (write elsewhere, rename over) is just a change.

Only plugin files (``domains/<d>/plugins/*.py``, not starting with ``_``), model files
(``domains/<d>/models/*.py``: the plugins importing them are reloaded), migrations
(``migrations/<d>/*.sql``, watched when ``migrations/`` exists at boot: applied before the batch's
plugins load, see :mod:`core.reload_sources`) and folders under ``domains/`` (a domain moved away)
count.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from typing import TYPE_CHECKING, Any

from watchfiles import Change, awatch

from core.base_tool import BaseTool
from core.errors import ToolNotConfiguredError
from core.reload_sources import SourceKind, classify
from core.reloader import FileOutcome, PluginHost, plugin_host
from core.settings import env_flag

if TYPE_CHECKING:
    from core.container import Container

log = logging.getLogger("keel.plugin_watcher")

CAPABILITY = "plugin_watch"
TICK_MS = 250
"""How often the watching thread wakes without changes (it also tells when watching has begun)."""
RECENT = 20


class PluginWatcherTool(BaseTool):
    """Watches domains/ and reloads plugin files as they change (PLUGINS_WATCH=1)."""

    name = "plugin_watcher"

    def __init__(self) -> None:
        self.debounce_ms = 1600
        self.step_ms = 50
        self.batches = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self._host: PluginHost | None = None
        self._watching = asyncio.Event()
        self._stopped = False
        self._enabled = False

    async def setup(self) -> None:
        if not env_flag("PLUGINS_WATCH"):
            self.kernel_registry.set_capability(
                CAPABILITY, {"enabled": False, "reason": "set PLUGINS_WATCH=1 to turn it on"}
            )
            raise ToolNotConfiguredError(
                "plugin files are not watched: set PLUGINS_WATCH=1 to load, reload and unload them "
                "while the service runs"
            )
        self.debounce_ms = _milliseconds("PLUGINS_WATCH_DEBOUNCE_MS", 1600)
        self.step_ms = _milliseconds("PLUGINS_WATCH_STEP_MS", 50)
        self._enabled = True
        self._publish()

    async def on_boot_complete(self, container: Container) -> None:
        if self._enabled:  # the kernel calls this hook on OFF tools too
            self._host = plugin_host(container)
            self._publish()

    async def serve(self, stop: asyncio.Event) -> None:
        """Apply each batch of changes under ``domains/`` until ``stop`` is set."""
        host = self._host
        if host is None:
            log.error("no kernel plugin host is reachable from the container; plugin files are not watched")
            self._stopped = True
            self._watching.set()
            return
        if not host.domains.is_dir():
            log.warning("%s does not exist; plugin files are not watched", host.domains)
            self._stopped = True
            self._watching.set()
            await stop.wait()
            return
        self._stopped = False
        migrations = host.root / "migrations"
        watched = [host.domains, migrations] if migrations.is_dir() else [host.domains]
        try:
            async for changes in awatch(
                *watched,
                watch_filter=self._wanted,
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=stop,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
            ):
                if not self._watching.is_set():
                    self._watching.set()
                    self._publish()
                    log.info("watching %s for plugin files", host.domains)
                if changes:
                    await self._apply(host, {path for _, path in changes})
        finally:
            self._stopped = True
            self._watching.set()
            self._publish()

    async def wait_until_watching(self) -> None:
        """Return once changes are being watched (or watching has ended)."""
        await self._watching.wait()

    @property
    def watching(self) -> bool:
        """Whether changes made now will be seen."""
        return self._watching.is_set() and not self._stopped

    # -- internals -----------------------------------------------------------------------------

    async def _apply(self, host: PluginHost, paths: set[str]) -> None:
        try:
            outcomes = await host.apply(paths)
        except Exception:  # one bad batch must not end watching
            log.exception("applying changes to %s failed", sorted(paths))
            return
        if outcomes:
            self._record(outcomes)

    def _record(self, outcomes: list[FileOutcome]) -> None:
        self.batches += 1
        self.recent.extend(outcome.as_dict() for outcome in outcomes)
        self._publish()

    def _wanted(self, change: Change, path: str) -> bool:
        host = self._host
        if host is None:
            return False
        name = os.path.basename(path)
        return (
            classify(host.root, path) is not SourceKind.OTHER
            or host.is_plugin_file(path)
            or ("." not in name and name != "__pycache__")
        )

    def _publish(self) -> None:
        domains = self._host.domains if self._host is not None else self.project_root / "domains"
        self.kernel_registry.set_capability(
            CAPABILITY,
            {
                "enabled": True,
                "watching": self.watching,
                "path": str(domains),
                "debounce_ms": self.debounce_ms,
                "step_ms": self.step_ms,
                "batches": self.batches,
                "recent": list(self.recent),
            },
        )


def _milliseconds(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive whole number of milliseconds, got {raw!r}")
    return int(raw)
