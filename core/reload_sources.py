"""The files besides plugin files that a live reload acts on: SQL migrations and domain models.

:class:`~core.reloader.PluginHost` hands every batch of changed paths to :class:`SourceChanges`
before it loads plugin files, and loads the plugin files this module asks for on top of the ones
that changed (or holds some back). Kept apart from the reloader so the reload of one plugin file
and what other sources mean for it can change independently.

- **A migration** (``migrations/<domain>/NNN_name.sql``, where ``keel migrate`` and the db tool
  look) that is new, or changed and not applied yet, is applied before any plugin file of the
  batch is loaded, by the tools that implement ``async apply_pending_migrations()`` (the db tool;
  see its docstring for the answer it gives). Applying goes through the same code as ``keel
  migrate``, so the same rules hold: each file once, in dependency order, in its own transaction;
  an applied migration edited on disk is refused, never re-run. A refused migration is the file's
  load error in the system dump (cleared once it applies, or once the file is gone); the plugin
  files of the batch in that migration's domain (and of every domain with a migration still
  pending after the refusal) are *held back*: not loaded, so the running version keeps serving and
  its ``reload_error`` (or, for a plugin not running yet, the plugin file's load error) says why.
  Held-back files are loaded with the next batch whose migrations all apply.
- **A model module** (``domains/<domain>/models/*.py``) is imported again, and so is every
  plugin file that imports it, directly or through other project modules (found by reading the
  files' ``import`` statements). The model and the project modules between it and the plugins
  are dropped from ``sys.modules`` first, so the plugins see the new model. A model that does not
  import (a syntax error, an exception at import) is the model file's load error; its dependants
  are not reloaded (their ``reload_error`` says why) and the modules dropped are put back, so
  everything keeps running the old version. A model no plugin imports is left alone.

Both kinds are used only once complete, as plugin files are (``PLUGIN_STABLE_MS``, bounded by
``PLUGIN_COMPLETE_TIMEOUT``): a SQL file must be non-empty and read the same (bytes, size, mtime)
twice that far apart; a model file must also parse. Each action logs one line on ``keel.reloader``:
``applied migration ...``, ``refused migration ...: <error>``, ``reloaded plugins A, B because model
M changed``, ``refused model M: <error>; plugins A, B keep their old version``.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import logging
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from time import perf_counter
from types import ModuleType
from typing import TYPE_CHECKING, Any

from core.loader import import_file, module_name
from core.settings import env_float

if TYPE_CHECKING:
    from core.kernel import Kernel
    from core.reloader import FileOutcome

log = logging.getLogger("keel.reloader")

MIGRATIONS = "migrations"
MIGRATION_HOOK = "apply_pending_migrations"


class SourceKind(StrEnum):
    PLUGIN = "plugin"
    MIGRATION = "migration"
    MODEL = "model"
    OTHER = "other"


def classify(root: Path, path: Path | str) -> SourceKind:
    """What a changed path under ``root`` is to a live reload (by where it is, not what it holds)."""
    text = os.path.abspath(os.fspath(path))
    prefix = f"{root}{os.sep}"
    if not text.startswith(prefix):
        return SourceKind.OTHER
    parts = text[len(prefix) :].split(os.sep)
    name = parts[-1]
    if name.startswith("."):
        return SourceKind.OTHER
    if len(parts) == 3 and parts[0] == MIGRATIONS and name.endswith(".sql"):
        return SourceKind.MIGRATION
    if len(parts) == 4 and parts[0] == "domains" and name.endswith(".py"):
        if parts[2] == "models":
            return SourceKind.MODEL
        if parts[2] == "plugins" and not name.startswith("_"):
            return SourceKind.PLUGIN
    return SourceKind.OTHER


@dataclass
class Batch:
    """The migration and model files of one batch of changed paths (each sorted, deduplicated)."""

    migrations: list[Path] = field(default_factory=list)
    models: list[Path] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.migrations or self.models)


@dataclass
class Prepared:
    """What :meth:`SourceChanges.prepare` did, and what it asks of the plugin loading that follows."""

    outcomes: list[FileOutcome] = field(default_factory=list)
    extra: list[Path] = field(default_factory=list)
    """Plugin files to load besides those that changed: dependants of a model, files released."""
    held: set[Path] = field(default_factory=set)
    """Plugin files of the batch not to load (a migration they may need was refused)."""
    because: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per changed model (relative), the plugin files reloaded for it."""

    def plugin_files(self, present: Iterable[Path]) -> list[Path]:
        wanted = {*present, *self.extra} - self.held
        return sorted(wanted)


class SourceChanges:
    """Migrations and models for one kernel's plugin host; see the module docstring."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.root = kernel.root
        self._held: dict[Path, str] = {}
        """Plugin files held back, and the refused migration each waits for."""
        self._blocked: dict[str, tuple[str, str]] = {}
        """Per domain, its first refused migration and the error, until a batch applies it."""

    def split(self, paths: Iterable[Path | str]) -> Batch:
        migrations: set[Path] = set()
        models: set[Path] = set()
        for raw in paths:
            kind = classify(self.root, raw)
            if kind is SourceKind.MIGRATION:
                migrations.add(Path(os.path.abspath(os.fspath(raw))))
            elif kind is SourceKind.MODEL:
                models.add(Path(os.path.abspath(os.fspath(raw))))
        return Batch(sorted(migrations), sorted(models))

    async def prepare(
        self, batch: Batch, present: list[Path], *, stable_s: float, complete_timeout: float
    ) -> Prepared:
        """Apply the batch's migrations and re-import its models; say which plugin files to load."""
        prepared = Prepared()
        for path in [*batch.migrations, *batch.models]:
            await until_complete(path, sql=path.suffix == ".sql", stable_s=stable_s, bound=complete_timeout)
        if batch.migrations:
            await self._migrate(batch.migrations, prepared)
        for model in batch.models:
            self._reload_model(model, prepared)
        for path in prepared.plugin_files(present):
            refused = self._blocked.get(path.parent.parent.name)
            if refused is not None:
                self._hold(path, *refused, prepared)
        return prepared

    def report(self, prepared: Prepared, outcomes: list[FileOutcome]) -> None:
        """One line per changed model whose plugins were reloaded, once their reload is done."""
        by_file = {outcome.file: outcome for outcome in outcomes}
        for model, files in prepared.because.items():
            done = [p for f in files if (o := by_file.get(f)) is not None and o.ok for p in o.plugins]
            failed = [p for f in files if (o := by_file.get(f)) is not None and not o.ok for p in o.plugins]
            if done:
                log.info("reloaded plugins %s because model %s changed", ", ".join(done), model)
            if failed:
                log.error(
                    "plugins %s did not reload after model %s changed (see their reload_error)",
                    ", ".join(failed),
                    model,
                )

    # -- migrations ------------------------------------------------------------------------------

    async def _migrate(self, changed: list[Path], prepared: Prepared) -> None:
        from core.reloader import ReloadAction

        registry = self._kernel.registry
        started = perf_counter()
        hooks = [
            (name, hook)
            for name, tool in self._kernel.container.get_raw_tools().items()
            if callable(hook := getattr(tool, MIGRATION_HOOK, None))
        ]
        names = [f"{path.parent.name}/{path.name}" for path in changed]
        if not hooks:
            log.warning(
                "migration %s changed, but no tool applies migrations while the service runs; "
                "restart (or run `keel migrate`) to apply it",
                ", ".join(names),
            )
            return
        applied: list[str] = []
        errors: dict[str, str] = {}
        limit = env_float("TOOL_SETUP_TIMEOUT", 30.0)
        for tool_name, hook in hooks:
            try:
                async with asyncio.timeout(limit):
                    answer = await hook()
            except Exception as exc:  # the tool could not even say: every changed file is refused
                if isinstance(exc, TimeoutError):
                    reason = f"{MIGRATION_HOOK}() did not finish within {limit:g}s (TOOL_SETUP_TIMEOUT)"
                else:
                    reason = _describe(exc)
                    log.error("tool %s: %s() raised", tool_name, MIGRATION_HOOK, exc_info=exc)
                answer = {"applied": [], "unapplied": names, "failed": None, "error": reason}
            applied.extend(answer.get("applied") or ())
            error = answer.get("error")
            if not error:
                continue
            failed = answer.get("failed")
            for name in answer.get("unapplied") or names:
                if failed is None or name == failed:
                    errors[name] = str(error)
                else:
                    errors[name] = f"not applied: {failed} was refused first: {error}"
        for name in applied:
            registry.clear_load_error(f"{MIGRATIONS}/{name}")
            log.info("applied migration %s", name)
            prepared.outcomes.append(_outcome(f"{MIGRATIONS}/{name}", ReloadAction.APPLIED, started, {}))
        for relative in list(registry.get_system_dump()["load_errors"]):
            if relative.startswith(MIGRATIONS + "/") and relative.partition("/")[2] not in errors:
                registry.clear_load_error(relative)  # applied now, or gone
        for name, error in sorted(errors.items()):
            relative = f"{MIGRATIONS}/{name}"
            registry.record_load_error(relative, error)
            log.error("refused migration %s: %s", name, error)
            prepared.outcomes.append(_outcome(relative, ReloadAction.FAILED, started, {relative: error}))
        self._blocked = {}
        for name in sorted(errors, reverse=True):  # a domain is held back by its first refused file
            self._blocked[name.partition("/")[0]] = (name, errors[name])
        released = [path for path in self._held if path.parent.parent.name not in self._blocked]
        for path in released:
            del self._held[path]
        prepared.extra.extend(path for path in released if path.is_file())

    def _hold(self, path: Path, migration: str, error: str, prepared: Prepared) -> None:
        from core.reloader import ReloadAction

        kernel = self._kernel
        relative = _relative(self.root, path)
        reason = f"not loaded: it waits for migration {migration}, which was refused: {error}"
        running = [p.plugin_id for p in kernel.plugins.values() if p.file == path]
        for plugin_id in running:
            kernel.registry.set_plugin_reload_error(plugin_id, reason)
        if not running:
            kernel.registry.record_load_error(relative, reason)
        self._held[path] = migration
        prepared.held.add(path)
        log.error(
            "held back plugin file %s%s until migration %s applies",
            relative,
            f" ({', '.join(running)} keep{'s' if len(running) == 1 else ''} serving)" if running else "",
            migration,
        )
        prepared.outcomes.append(
            _outcome(relative, ReloadAction.FAILED, perf_counter(), {relative: reason}, tuple(running))
        )

    # -- models --------------------------------------------------------------------------------

    def _reload_model(self, path: Path, prepared: Prepared) -> None:
        from core.reloader import ReloadAction

        kernel = self._kernel
        started = perf_counter()
        relative = _relative(self.root, path)
        target = module_name(self.root, path)
        graph = _ImportGraph(self.root)
        files = [f for f in self._known_plugin_files() if graph.reaches(f, target)]
        if not files:
            kernel.registry.clear_load_error(relative)
            log.info("model %s changed; no plugin imports it, nothing to reload", relative)
            return
        plugin_modules = {module_name(self.root, f) for f in files}
        dropped = {
            name: module
            for name, module in list(sys.modules.items())
            if name == target
            or (
                name.startswith("domains.")
                and name not in plugin_modules
                and (file := getattr(module, "__file__", None))
                and graph.reaches(Path(file), target)
            )
        }
        _drop(dropped)
        ids = tuple(p.plugin_id for p in kernel.plugins.values() if p.file in files)
        if path.is_file():
            _drop_bytecode(path)
            try:
                module = import_file(self.root, path, fresh=True)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    raise
                _restore(dropped)  # everything keeps running (and importing) the old version
                error = _describe(exc)
                kernel.registry.record_load_error(relative, error)
                for plugin_id in ids:
                    kernel.registry.set_plugin_reload_error(
                        plugin_id, f"not reloaded: model {relative} does not import: {error}"
                    )
                log.error(
                    "refused model %s: %s; plugins %s keep their old version", relative, error, ", ".join(ids)
                )
                failure = _outcome(relative, ReloadAction.FAILED, started, {relative: error}, ids)
                prepared.outcomes.append(failure)
                return
            _attach(target, module)
        kernel.registry.clear_load_error(relative)
        prepared.extra.extend(files)
        prepared.because[relative] = tuple(_relative(self.root, f) for f in files)

    def _known_plugin_files(self) -> list[Path]:
        """Plugin files the kernel knows: running, in the dump, or failed to load."""
        kernel = self._kernel
        known = {Path(p.file) for p in kernel.plugins.values()}
        known.update(self.root / relative for relative in kernel.registry.files_under("domains"))
        return sorted(p for p in known if classify(self.root, p) is SourceKind.PLUGIN and p.is_file())


class _ImportGraph:
    """Which project modules a file imports, read from its source (no import runs)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._edges: dict[str, set[str]] = {}

    def reaches(self, path: Path, target: str) -> bool:
        seen: set[str] = set()
        stack = [os.path.abspath(path)]
        while stack:
            file = stack.pop()
            if file in seen:
                continue
            seen.add(file)
            for name in self._imports(file):
                if name == target:
                    return True
                found = self._file_of(name)
                if found is not None:
                    stack.append(found)
        return False

    def _imports(self, file: str) -> set[str]:
        cached = self._edges.get(file)
        if cached is not None:
            return cached
        names: set[str] = set()
        try:
            with open(file, "rb") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError):
            tree = None
        if tree is not None:
            own = module_name(self.root, file)
            package = own if file.endswith("__init__.py") else own.rpartition(".")[0]
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    base = _resolve(node.module, node.level, package)
                    if base:
                        names.add(base)
                        names.update(f"{base}.{alias.name}" for alias in node.names)
        self._edges[file] = names
        return names

    def _file_of(self, name: str) -> str | None:
        if not name.startswith("domains."):
            return None
        base = os.path.join(self.root, *name.split("."))
        for candidate in (f"{base}.py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
        return None


def _resolve(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    if level - 1 > len(parts):
        return ""
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


async def until_complete(path: Path, *, sql: bool, stable_s: float, bound: float) -> None:
    """Return once ``path`` looks finished (see the module docstring), or after ``bound`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    previous: tuple[bytes, int, int] | None = None
    while True:
        try:
            stat = os.stat(path)
            content = _read_bytes(path)
        except OSError:
            return  # gone: applying (or importing) reports it
        current = (content, stat.st_size, stat.st_mtime_ns)
        if current == previous and _complete(content, sql=sql):
            return
        if loop.time() >= deadline:
            log.warning("%s did not become complete within %gs; taking it as it is", path, bound)
            return
        previous = current
        await asyncio.sleep(stable_s)


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as handle:  # a migration or a model is small: reading it on the loop is fine
        return handle.read()


def _complete(content: bytes, *, sql: bool) -> bool:
    if sql:
        return bool(content.strip())
    try:
        ast.parse(content)
    except (SyntaxError, ValueError):
        return False
    return True


def _drop(modules: dict[str, ModuleType]) -> None:
    """Forget ``modules``, also as attributes of their packages: ``from pkg import mod`` takes the
    attribute when there is one, and would hand out the old module without importing it again."""
    for name, module in modules.items():
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        package = sys.modules.get(parent)
        if package is not None and getattr(package, child, None) is module:
            delattr(package, child)


def _restore(modules: dict[str, ModuleType]) -> None:
    for name, module in modules.items():
        sys.modules[name] = module
        _attach(name, module)


def _attach(name: str, module: ModuleType) -> None:
    """Point the parent package's attribute at the new module (``from pkg import mod`` reads it)."""
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)


def _drop_bytecode(path: Path) -> None:
    try:
        os.unlink(importlib.util.cache_from_source(str(path)))
    except (OSError, NotImplementedError, ValueError):
        pass


def _relative(root: Path, path: Path) -> str:
    text, prefix = str(path), f"{root}{os.sep}"
    return text[len(prefix) :] if text.startswith(prefix) else text


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg} ({Path(exc.filename or '?').name}, line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"


def _outcome(
    relative: str, action: Any, started: float, errors: dict[str, str], plugins: tuple[str, ...] = ()
) -> FileOutcome:
    from core.reloader import FileOutcome

    return FileOutcome(relative, action, plugins, errors, (perf_counter() - started) * 1000.0)
