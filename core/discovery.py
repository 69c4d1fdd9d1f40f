"""Where a root's tools and plugins are, and importing them: a file that does not import, or a
tool that cannot be constructed, is recorded in the registry as that file's (or tool's) failure
and discovery goes on."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.base_plugin import BasePlugin
from core.base_tool import BaseTool
from core.container import Container
from core.lifecycle import PART_FAILURES, RESERVED_PARAMETERS, describe, log_failure
from core.loader import import_file
from core.registry import Registry, ToolStatus

log = logging.getLogger("keel.kernel")


class Discovery:
    """The tools and plugin files of one root."""

    def __init__(self, root: Path, registry: Registry, container: Container) -> None:
        self.root = root
        self.registry = registry
        self.container = container
        self._prefix = f"{root}{os.sep}"

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, as the dump names files (string slicing: boot is hot)."""
        text, prefix = os.fspath(path), self._prefix
        return text[len(prefix) :] if text.startswith(prefix) else text

    def tool_classes(self) -> Iterable[type[BaseTool]]:
        """Tool classes, imported without constructing them (to choose the event loop)."""
        tools_dir = self.root / "tools"
        for path in python_files(tools_dir):
            try:
                module = import_file(self.root, path)
            except Exception:
                continue  # boot reports it
            yield from classes_defined_in(module, BaseTool)

    def discover_tools(self) -> list[BaseTool]:
        """Import every tool file, construct each tool, register it and add it to the container;
        the tools that were constructed, in discovery order (the order of setup and shutdown)."""
        tools_dir = self.root / "tools"
        found: dict[str, tuple[type[BaseTool], Path]] = {}
        for path in python_files(tools_dir):
            relative = self.relative(path)
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
                    first = self.relative(found[cls.name][1])
                    error = f"two tools are named {cls.name!r}: {first} and {relative}; {first} was loaded"
                    self.registry.record_load_error(relative, error)
                    log.error("tool file %s: %s", relative, error)
                    continue
                found[cls.name] = (cls, path)
        tools: list[BaseTool] = []
        for name, (cls, path) in found.items():
            relative = self.relative(path)
            try:
                tool = cls()
            except PART_FAILURES as exc:
                self.registry.register_tool(
                    name, ToolStatus.DEAD, f"constructor raised {describe(exc)}", relative
                )
                log_failure(f"tool {name}", "the constructor", exc, self.root)
                continue
            self.registry.register_tool(name, ToolStatus.OK, None, relative)
            tool.bind(project_root=self.root, registry=self.registry)
            self.container.add(tool)
            tools.append(tool)
        return tools

    def plugin_files(self) -> list[Path]:
        """``domains/*/plugins/*.py`` (not ``_private.py``), sorted by domain then file name.

        Listed with ``os.scandir`` and sorted as strings: ``Path.glob`` and sorting ``Path``
        objects were a visible share of booting a root with a hundred plugins. The ``Path`` of
        each file comes from ``Path.iterdir()``, which builds a child without parsing it again
        (``folder / name`` parses ``name``, and that too showed at a hundred files)."""
        domains = os.path.join(self.root, "domains")
        found: list[Path] = []
        for domain in sorted_entries(domains, directories=True):
            plugins = os.path.join(domains, domain, "plugins")
            names = {
                name
                for name in sorted_entries(plugins, directories=False)
                if name.endswith(".py") and not name.startswith("_")
            }
            if not names:
                continue
            try:
                paths = {path.name: path for path in Path(plugins).iterdir() if path.name in names}
            except OSError:  # gone since it was listed
                continue
            found.extend(paths[name] for name in sorted(paths))
        return found

    def import_module(self, path: Path, *, fresh: bool = False) -> tuple[Any, str | None]:
        """``(module, None)``, or ``(None, error)`` with the error recorded as the file's load error."""
        relative = self.relative(path)
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

    def plugin_classes(self, module: Any) -> list[type[BasePlugin]]:
        """The concrete plugin classes ``module`` defines itself (not those it imports)."""
        return classes_defined_in(module, BasePlugin)


def sorted_entries(directory: str, *, directories: bool) -> list[str]:
    """Names of the folders (or files) in ``directory``, following links; [] when it is absent."""
    try:
        with os.scandir(directory) as entries:
            return sorted(e.name for e in entries if (e.is_dir() if directories else e.is_file()))
    except (FileNotFoundError, NotADirectoryError):
        return []


def python_files(directory: Path) -> list[Path]:
    """Every ``*.py`` below ``directory``, following linked folders (``Path.rglob`` does not on
    Python 3.11), skipping caches and test files; sorted so discovery order is stable."""
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for folder, subfolders, files in os.walk(directory, followlinks=True):
        # A folder is known by its device and inode (one stat; ``realpath`` costs one per part).
        try:
            stat = os.stat(folder)
        except OSError:  # gone since it was listed: nothing below it to walk
            subfolders[:] = []
            continue
        identity = (stat.st_dev, stat.st_ino)
        if identity in seen:  # a link back up the tree: walked already, and walking it again never ends
            subfolders[:] = []
            continue
        seen.add(identity)
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        found.extend(
            Path(folder, name) for name in files if name.endswith(".py") and not name.startswith("test_")
        )
    return sorted(found)


def classes_defined_in(module: Any, base: type[Any]) -> list[Any]:
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, base)
        and obj is not base
        and obj.__module__ == module.__name__
        and not obj.__flags__ & inspect.TPFLAGS_IS_ABSTRACT  # inspect.isabstract, without the call
    ]
