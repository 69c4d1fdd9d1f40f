"""Import project files by path, under dotted names rooted at the project root.

``tools/db/db_tool.py`` becomes module ``tools.db.db_tool`` whose parent packages point exactly at
the directories of *this* root, so relative and absolute imports between a tool's own modules work,
and two roots booted one after the other in one process (the test suite does this) never mix files.
A module already imported from the same file is reused unless ``fresh`` asks for a new import (a
plugin file that changed on disk).

Paths are handled as strings: boot imports every file of the project through here, and pathlib's
per-call parsing was a measurable share of boot time.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec, SourceFileLoader
from pathlib import Path
from types import ModuleType


def module_name(root: Path | str, path: Path | str) -> str:
    return _name_within(_absolute(root), _absolute(path))


def _name_within(root_str: str, path_str: str) -> str:
    prefix = root_str.rstrip(os.sep) + os.sep
    relative = path_str[len(prefix) :] if path_str.startswith(prefix) else os.path.relpath(path_str, root_str)
    parts = relative[:-3].split(os.sep) if relative.endswith(".py") else relative.split(os.sep)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_file(root: Path | str, path: Path | str, *, fresh: bool = False) -> ModuleType:
    """Import ``path`` (inside ``root``) and return the module; its import errors propagate.

    ``path`` is not resolved: a test root may link to the project's own tools, and the module must
    still be named after where it sits in *this* root.
    """
    root_str = _absolute(root)
    path_str = _absolute(path)
    name = _name_within(root_str, path_str)
    directory = root_str.rstrip(os.sep)
    package = ""
    for part in name.split(".")[:-1]:
        directory = f"{directory}{os.sep}{part}"
        package = f"{package}.{part}" if package else part
        current = sys.modules.get(package)  # the usual case, checked inline: boot imports every file
        if current is None or getattr(current, "__path__", None) != [directory]:
            _ensure_package(package, directory)
    existing = sys.modules.get(name)
    if existing is not None and not fresh and getattr(existing, "__file__", None) == path_str:
        return existing
    spec = _source_spec(name, path_str)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path_str}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if existing is not None:
            sys.modules[name] = existing
        else:
            sys.modules.pop(name, None)
        raise
    return module


def _source_spec(name: str, path_str: str) -> ModuleSpec | None:
    """What ``importlib.util.spec_from_file_location(name, path_str)`` returns for an absolute
    ``.py`` path, built directly: the general helper tries every kind of loader (listing the
    extension suffixes each time) and asks the loader whether it is a package, which was a
    visible share of booting a root with a hundred plugin files."""
    if not path_str.endswith(".py"):
        return importlib.util.spec_from_file_location(name, path_str)
    spec = ModuleSpec(name, SourceFileLoader(name, path_str), origin=path_str)
    spec.has_location = True
    if path_str.endswith(f"{os.sep}__init__.py") and name.rpartition(".")[2] != "__init__":
        spec.submodule_search_locations = [os.path.dirname(path_str)]
    return spec


def forget(root: Path | str, path: Path | str) -> None:
    """Drop a file's module from ``sys.modules`` (its plugin file was deleted)."""
    sys.modules.pop(module_name(root, path), None)


def _absolute(path: Path | str) -> str:
    text = os.fspath(path)
    # ``startswith(os.sep)``: what ``os.path.isabs`` tests on POSIX, without its call (called
    # twice for every file boot imports); elsewhere ``abspath`` still gives the right answer.
    return text if text.startswith(os.sep) and "/." not in text else os.path.abspath(text)


def _ensure_package(name: str, directory: str) -> None:
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__path__", None) == [directory]:
        return
    if existing is not None:
        # A package of the same name from another root: forget it and everything under it.
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
    init = os.path.join(directory, "__init__.py")
    if os.path.exists(init):
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[directory])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import package {name} from {directory}")
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    else:
        package = ModuleType(name)
        package.__path__ = [directory]
        package.__package__ = name
        sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], child, package)
