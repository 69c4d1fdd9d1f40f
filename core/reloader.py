"""Loading, reloading and unloading plugin files while the service runs.

The unit is one file under ``domains/<domain>/plugins/``; a plugin is identified by
``<domain>.<Class>``, whichever file defines it. :meth:`PluginHost.apply` takes the paths that
changed and looks at the disk, not at what the change was called: a file that exists is loaded
(or reloaded), a file that is gone is unloaded. In one batch the files that exist go first, so a
file renamed (or a class moved to another file) is a reload of the same plugin from its new file
without a moment where its routes are missing; unloading the old name then finds nothing left.

- **A new plugin** is injected, constructed and booted exactly as at start-up; a failure makes it
  DEAD with the reason, as at boot.
- **A running plugin** is replaced in stages. The new version is constructed and booted first,
  while the old one keeps serving, under a *staging owner* (``<domain>.<Class>#staging-<n>``,
  see :func:`staging_owner`) so tools can keep what it registers apart. Only if it boots is it
  promoted: every tool swaps the old version's registrations for the new one's in one step
  (``promote_owner``). Then the old version is retired: the kernel waits for its in-flight work
  (``drain_owner``, at most ``PLUGIN_DRAIN_TIMEOUT`` seconds, default 10), runs its
  ``on_shutdown``, and cancels the background tasks it started through the kernel.
- **A new version that fails** — the file does not import (a syntax error), a required tool is
  missing, ``__init__`` or ``on_boot`` raises, ``on_boot`` outlives ``PLUGIN_BOOT_TIMEOUT`` — is
  dropped: what it registered is released, its tasks are cancelled, its ``on_shutdown`` is not
  called (as for a plugin that fails to boot), and the old version keeps serving. The dump shows
  the failure as the running plugin's ``reload_error`` (and, when the file did not import, as the
  file's ``load_errors`` entry). The next successful reload clears both.
- **A class no longer in its file, or a deleted file**: its plugins are unloaded — their
  registrations are released first (their routes answer 404 from then on, their subscriptions
  stop), then in-flight work drains, then ``on_shutdown`` runs and their tasks are cancelled.
  A deleted file's registry entries, load error and module are forgotten.

In-flight requests: a request that matched an old route keeps the old handler (and through it the
old plugin instance) until it finishes, so it completes on the old version. The old version's
``on_shutdown`` runs after those requests finish, or after ``PLUGIN_DRAIN_TIMEOUT`` when some are
still running — then they finish against a version that has been shut down.

A changed file is used only once it is complete: it parses, reads the same twice
``PLUGIN_STABLE_MS`` apart (default 50), and still defines a class when it defines a running plugin
(an editor's non-atomic save truncates the file, then writes it; in between it is empty, or only
its imports). An incomplete file is looked at again until ``PLUGIN_COMPLETE_TIMEOUT`` seconds
(default 2) have passed; only then is it taken as it is. So a save never takes a route away.

Changes are applied one at a time (a lock): a reload never overlaps another. Before a file is
imported again its cached bytecode is removed, since two saves within the same second that leave
the file the same size would otherwise import the stale ``.pyc``. Only the plugin file itself is
imported again; modules it imports stay as they were, except a domain's models: a changed model
(``domains/<d>/models/*.py``) is imported again with every plugin file that imports it, and a
new or changed SQL migration (``migrations/<d>/*.sql``) is applied before the batch's plugin files
load, see :mod:`core.reload_sources`.

What tools implement (all optional, all looked up by name; a tool that registers things for
plugins implements at least ``release_owner``):

- ``release_owner(owner)``: forget everything ``owner`` registered.
- ``promote_owner(staged, owner)``: the plugin booted under ``staged`` replaces ``owner``; in one
  step drop what ``owner`` registered and make what ``staged`` registered live and owned by
  ``owner``. A tool that holds registrations which must not overlap (routes, subscriptions) keeps
  those made under a staging owner (:func:`is_staging`) pending until then; :func:`base_owner`
  names the plugin a staging owner stands for. Without ``promote_owner`` the kernel releases the
  old version's owner at promotion and the new version's registrations keep their staging owner
  (they are released under it when the plugin is unloaded).
- ``async drain_owner(owner)``: return once the work ``owner``'s released registrations were
  doing when they were released (requests in flight) has finished.
- ``async on_plugins_changed(container)``: called once after every batch of changes, as
  ``on_boot_complete`` is after boot (the context tool rewrites AI_CONTEXT.md there).

The host is how file watching stays a kernel capability while ``core`` imports only the standard
library: the watcher lives in a tool (``tools/plugin_watcher``, built on ``watchfiles``), receives
the container in ``on_boot_complete`` and asks :func:`plugin_host` for the kernel's host, which it
calls with the paths that changed.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import logging
import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

from core.container import Container
from core.loader import forget
from core.reload_sources import SourceChanges
from core.settings import env_float

if TYPE_CHECKING:
    from core.kernel import Kernel
    from core.lifecycle import LoadedPlugin

log = logging.getLogger("keel.reloader")

STAGING_MARK = "#staging-"


def staging_owner(plugin_id: str, attempt: int) -> str:
    """The owner a new version of ``plugin_id`` registers under until it is promoted."""
    return f"{plugin_id}{STAGING_MARK}{attempt}"


def is_staging(owner: str | None) -> bool:
    """Whether ``owner`` is a new version that has not been promoted (yet)."""
    return owner is not None and STAGING_MARK in owner


def base_owner(owner: str | None) -> str | None:
    """The ``<domain>.<Class>`` an owner stands for (itself, unless it is a staging owner)."""
    return owner.partition(STAGING_MARK)[0] if owner is not None else None


class ReloadAction(StrEnum):
    LOADED = "loaded"
    RELOADED = "reloaded"
    UNLOADED = "unloaded"
    FAILED = "failed"
    APPLIED = "applied"
    """A migration (:mod:`core.reload_sources`)."""


@dataclass(frozen=True)
class FileOutcome:
    """What one change to one file did: the plugins it touched, and every failure by plugin id
    (or by file, when the file did not import)."""

    file: str
    action: ReloadAction
    plugins: tuple[str, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "action": str(self.action),
            "plugins": list(self.plugins),
            "errors": dict(self.errors),
            "duration_ms": round(self.duration_ms, 3),
        }


_HOSTS: weakref.WeakKeyDictionary[Container, weakref.ref[PluginHost]] = weakref.WeakKeyDictionary()


def attach_plugin_host(container: Container, host: PluginHost) -> None:
    """Make ``host`` reachable from ``container`` (the kernel does this for its own)."""
    _HOSTS[container] = weakref.ref(host)


def plugin_host(container: Container) -> PluginHost | None:
    """The plugin host of the kernel that owns ``container``, if that kernel is still alive."""
    ref = _HOSTS.get(container)
    return ref() if ref is not None else None


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as file:  # a plugin file is small: reading it on the loop is fine
        return file.read()


def _complete(content: bytes, running: bool) -> bool:
    """Whether a plugin file's bytes look finished: they parse, and define a class when the file
    defines a running plugin (a save caught half way may be only the imports)."""
    try:
        tree = ast.parse(content)
    except (SyntaxError, ValueError):
        return False
    return not running or any(isinstance(node, ast.ClassDef) for node in tree.body)


class PluginHost:
    """One kernel's plugins as files that come, change and go; see the module docstring.

    It drives the kernel's :class:`~core.lifecycle.PluginLifecycle` (the same stages boot uses)
    and :class:`~core.discovery.Discovery` (importing a file, naming it), through their public
    methods only."""

    def __init__(self, kernel: Kernel) -> None:
        self._lifecycle = kernel.lifecycle
        self._discovery = kernel.discovery
        self._registry = kernel.registry
        self.root = kernel.root
        self.domains = kernel.root / "domains"
        self.drain_timeout = 10.0
        self._lock = asyncio.Lock()
        self._attempts = 0
        self._closed = False
        self.stable_s = 0.05
        self.complete_timeout = 2.0
        self.sources = SourceChanges(kernel)

    def configure(self) -> None:
        """Read ``PLUGIN_DRAIN_TIMEOUT`` and the completeness bounds; the kernel calls this at boot."""
        self.drain_timeout = env_float("PLUGIN_DRAIN_TIMEOUT", 10.0)
        self.stable_s = env_float("PLUGIN_STABLE_MS", 50.0) / 1000
        self.complete_timeout = env_float("PLUGIN_COMPLETE_TIMEOUT", 2.0)
        self._closed = False

    async def _until_complete(self, path: Path) -> None:
        """Return once ``path`` is complete (see the module docstring), or after the bound."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.complete_timeout
        running = bool(self._lifecycle.plugins_of_file(path))
        previous: bytes | None = None
        while True:
            try:
                content = _read_bytes(path)
            except OSError:
                return  # gone (or unreadable): the load reports it
            if content == previous and _complete(content, running):
                return
            if loop.time() >= deadline:
                log.warning(
                    "%s did not become complete within %gs; taking it as it is", path, self.complete_timeout
                )
                return
            previous = content
            await asyncio.sleep(self.stable_s)

    def is_plugin_file(self, path: Path | str) -> bool:
        """Whether ``path`` is where the kernel looks for plugins: ``domains/<d>/plugins/<name>.py``
        with a name that does not start with ``_`` or ``.``."""
        text = os.path.abspath(os.fspath(path))
        prefix = f"{self.domains}{os.sep}"
        if not text.startswith(prefix):
            return False
        parts = text[len(prefix) :].split(os.sep)
        return (
            len(parts) == 3
            and parts[1] == "plugins"
            and parts[2].endswith(".py")
            and not parts[2].startswith(("_", "."))
        )

    # -- what the watcher (or a test, or an operator) calls ------------------------------------

    async def apply(self, paths: Iterable[Path | str]) -> list[FileOutcome]:
        """Bring the running plugins in line with these paths as they are on disk now; call it on
        the kernel's event loop. Migration and model files are handled first
        (:mod:`core.reload_sources`); other paths that are not plugin files are ignored, except
        folders under ``domains/``, which stand for the plugin files below them. Tools get one
        ``on_plugins_changed`` per call that changed anything."""
        paths = list(paths)
        sources = self.sources.split(paths)
        present, gone = self._split(paths)
        if not present and not gone and not sources:
            return []
        outcomes: list[FileOutcome] = []
        async with self._lock:
            if self._closed:
                log.info("the kernel is shutting down; ignoring %d changed plugin files", len(present + gone))
                return []
            prepared = await self.sources.prepare(
                sources, present, stable_s=self.stable_s, complete_timeout=self.complete_timeout
            )  # logs its own outcomes
            for path in prepared.plugin_files(present):
                await self._until_complete(path)
                outcomes.append((await self._load(path, fresh=True))[0])
            for path in gone:
                outcome = await self._unload_file(path)
                if outcome is not None:
                    outcomes.append(outcome)
            if outcomes or prepared.outcomes:
                await self._notify()
        for outcome in outcomes:
            _log_outcome(outcome)
        self.sources.report(prepared, outcomes)
        return prepared.outcomes + outcomes

    async def load_file(self, path: Path, *, fresh: bool = False) -> list[LoadedPlugin]:
        """Load (or reload) one file; the plugins that were constructed."""
        async with self._lock:
            _, built = await self._load(path, fresh=fresh)
            await self._notify()
        return built

    async def unload_plugin(self, plugin_id: str) -> None:
        async with self._lock:
            plugin = self._lifecycle.plugins.get(plugin_id)
            if plugin is not None:
                await self._unload(plugin)
            else:
                self._lifecycle.release(plugin_id)
                self._registry.remove_plugin(plugin_id)
            await self._notify()

    async def close(self) -> None:
        """Refuse further changes (the kernel is shutting down), once the one in progress is done."""
        async with self._lock:
            self._closed = True

    # -- the mechanics ---------------------------------------------------------------------------

    def _split(self, paths: Iterable[Path | str]) -> tuple[list[Path], list[Path]]:
        """The plugin files ``paths`` stand for: those on disk, and those gone (each sorted).

        A path under ``domains/`` that is not a plugin file (a domain or ``plugins`` folder that
        was moved or deleted, say) stands for every plugin file below it, on disk or known.
        """
        files: set[str] = set()
        folders: list[str] = []
        for raw in paths:
            text = os.path.abspath(os.fspath(raw))
            if self.is_plugin_file(text):
                files.add(text)
            elif text.startswith(f"{self.domains}{os.sep}") and not text.endswith(".py"):
                folders.append(text + os.sep)
        if folders:
            candidates = {str(p.file) for p in self._lifecycle.plugins.values()}
            for folder in folders:
                known = self._registry.files_under(self._discovery.relative(Path(folder)))
                candidates.update(str(self.root / relative) for relative in known)
                candidates.update(str(p) for p in Path(folder).glob("**/*.py"))
            files.update(c for c in candidates if c.startswith(tuple(folders)) and self.is_plugin_file(c))
        ordered = sorted(Path(text) for text in files)
        present = [path for path in ordered if path.is_file()]
        return present, [path for path in ordered if path not in present]

    async def _load(self, path: Path, *, fresh: bool) -> tuple[FileOutcome, list[LoadedPlugin]]:
        started = perf_counter()
        relative = self._discovery.relative(path)
        previous = self._lifecycle.plugins_of_file(path)
        if fresh:
            _drop_bytecode(path)
        module, error = self._discovery.import_module(path, fresh=fresh)
        if module is None:
            for plugin in previous:
                self._registry.set_plugin_reload_error(plugin.plugin_id, error)
            ids = tuple(p.plugin_id for p in previous)
            failure = {relative: error or "import failed"}
            return _outcome(relative, ReloadAction.FAILED, started, ids, failure), []
        versions = self._construct_versions(module, path)
        booted = await self._boot_versions(versions)
        for plugin in previous:
            if (
                plugin.plugin_id not in versions.declared
                and self._lifecycle.plugins.get(plugin.plugin_id) is plugin
            ):
                await self._unload(plugin)
        self._forget_registry_entries(relative, keep=versions.declared)
        action = ReloadAction.RELOADED if previous or versions.staged else ReloadAction.LOADED
        if versions.errors and not booted:
            action = ReloadAction.FAILED
        return _outcome(relative, action, started, tuple(versions.declared), versions.errors), versions.built

    def _construct_versions(self, module: Any, path: Path) -> _Versions:
        """Construct every plugin class of ``module``: a new plugin as at boot, a new version of a
        running one under a staging owner (a failure to construct is then its reload error)."""
        lifecycle = self._lifecycle
        domain = path.parent.parent.name
        versions = _Versions()
        for cls in self._discovery.plugin_classes(module):
            plugin_id = f"{domain}.{cls.__name__}"
            versions.declared.append(plugin_id)
            running = lifecycle.plugins.get(plugin_id)
            if running is None:
                result = lifecycle.construct(cls, domain, path)
                if isinstance(result, str):
                    versions.errors[plugin_id] = result
                else:
                    versions.newcomers.append(result)
                continue
            self._attempts += 1
            owner = staging_owner(plugin_id, self._attempts)
            result = lifecycle.construct(cls, domain, path, staged_owner=owner)
            if isinstance(result, str):
                versions.errors[plugin_id] = result
                self._registry.set_plugin_reload_error(plugin_id, result)
                lifecycle.release(owner)
            else:
                versions.staged.append((result, running))
        return versions

    async def _boot_versions(self, versions: _Versions) -> list[str]:
        """Boot what was constructed (one ``on_boot`` batch), admit the new plugins, swap in the new
        versions that booted and retire what they replace; the ids that now run the new code."""
        lifecycle = self._lifecycle
        built = versions.built
        reasons = await lifecycle.run_boot_hooks(built) if built else []
        booted: list[str] = []
        for plugin, reason in zip(versions.newcomers, reasons, strict=False):
            await lifecycle.admit(plugin, reason)
            if reason is None:
                booted.append(plugin.plugin_id)
            else:
                versions.errors[plugin.plugin_id] = reason
        promoted: list[tuple[LoadedPlugin, LoadedPlugin]] = []
        for (new, running), reason in zip(versions.staged, reasons[len(versions.newcomers) :], strict=True):
            if reason is None:
                promoted.append((new, running))
            else:
                versions.errors[new.plugin_id] = reason
                self._registry.set_plugin_reload_error(new.plugin_id, reason)
                await lifecycle.discard(new)
        # The swap: no await from the first promotion to the last, so a request sees either every
        # old registration of the file or every new one.
        for new, running in promoted:
            lifecycle.promote(new, running)
            booted.append(new.plugin_id)
        await asyncio.gather(
            *(
                lifecycle.retire(running, swapped=True, drain_timeout=self.drain_timeout)
                for _, running in promoted
            )
        )
        return booted

    async def _unload(self, plugin: LoadedPlugin) -> None:
        await self._lifecycle.unload(plugin, drain_timeout=self.drain_timeout)

    async def _unload_file(self, path: Path) -> FileOutcome | None:
        """Unload a deleted file's plugins; ``None`` when the kernel never knew the file."""
        started = perf_counter()
        relative = self._discovery.relative(path)
        running = self._lifecycle.plugins_of_file(path)
        recorded = self._registry.plugins_in_file(relative)
        forget(self.root, path)  # also when its plugins moved to another file (a rename)
        if not running and not recorded and not self._registry.has_load_error(relative):
            return None
        for plugin in reversed(running):
            await self._unload(plugin)
        self._forget_registry_entries(relative, keep=())
        self._registry.clear_load_error(relative)
        ids = tuple(sorted({p.plugin_id for p in running} | set(recorded)))
        return _outcome(relative, ReloadAction.UNLOADED, started, ids, {})

    def _forget_registry_entries(self, relative: str, *, keep: Iterable[str]) -> None:
        """Drop registry entries of ``relative`` for plugins it no longer defines and that do not run."""
        kept = set(keep)
        for plugin_id in self._registry.plugins_in_file(relative):
            if plugin_id not in kept and plugin_id not in self._lifecycle.plugins:
                self._registry.remove_plugin(plugin_id)

    async def _notify(self) -> None:
        await self._lifecycle.notify_changed()


@dataclass
class _Versions:
    """What one plugin file's import produced: the plugin ids it declares, the new plugins, the new
    versions of running ones (each with the version it would replace), and failures by plugin id."""

    declared: list[str] = field(default_factory=list)
    newcomers: list[LoadedPlugin] = field(default_factory=list)
    staged: list[tuple[LoadedPlugin, LoadedPlugin]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def built(self) -> list[LoadedPlugin]:
        return self.newcomers + [new for new, _ in self.staged]


def _outcome(
    relative: str, action: ReloadAction, started: float, plugins: tuple[str, ...], errors: dict[str, str]
) -> FileOutcome:
    return FileOutcome(relative, action, plugins, errors, (perf_counter() - started) * 1000.0)


def _log_outcome(outcome: FileOutcome) -> None:
    if outcome.ok:
        log.info(
            "%s %s (%s) in %.1f ms",
            outcome.action,
            outcome.file,
            ", ".join(outcome.plugins) or "no plugins",
            outcome.duration_ms,
        )
        return
    for where, error in outcome.errors.items():
        if where == outcome.file:
            log.error("%s did not load; what was running keeps running: %s", outcome.file, error)
        else:
            log.error("%s (%s) did not %s: %s", where, outcome.file, _VERB[outcome.action], error)


_VERB = {
    ReloadAction.LOADED: "boot",
    ReloadAction.RELOADED: "boot",
    ReloadAction.FAILED: "boot",
    ReloadAction.UNLOADED: "unload",
    ReloadAction.APPLIED: "apply",
}


def _drop_bytecode(path: Path) -> None:
    try:
        os.unlink(importlib.util.cache_from_source(str(path)))
    except (OSError, NotImplementedError, ValueError):
        pass  # nothing cached, or caching is off: the import reads the source either way
