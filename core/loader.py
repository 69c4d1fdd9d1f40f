"""Import project files by path, under dotted names rooted at the project root.

``tools/db/db_tool.py`` becomes module ``tools.db.db_tool`` whose parent packages point exactly at
the directories of *this* root, so relative and absolute imports between a tool's own modules work,
and two roots booted one after the other in one process (the test suite does this) never mix files.
A module already imported from the same file is reused unless ``fresh`` asks for a new import (a
plugin file that changed on disk).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_file(root: Path, path: Path, *, fresh: bool = False) -> ModuleType:
    """Import ``path`` (inside ``root``) and return the module; its import errors propagate."""
    root = root.resolve()
    path = path.absolute()  # not resolve(): a test root may link to the project's own tools
    name = module_name(root, path)
    parts = name.split(".")
    for depth in range(1, len(parts)):
        _ensure_package(".".join(parts[:depth]), root.joinpath(*parts[:depth]))
    existing = sys.modules.get(name)
    if existing is not None and not fresh and _same_file(existing, path):
        return existing
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
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


def forget(root: Path, path: Path) -> None:
    """Drop a file's module from ``sys.modules`` (its plugin file was deleted)."""
    sys.modules.pop(module_name(root.resolve(), path.absolute()), None)


def _same_file(module: ModuleType, path: Path) -> bool:
    file = getattr(module, "__file__", None)
    return file is not None and Path(file).absolute() == path


def _ensure_package(name: str, directory: Path) -> None:
    existing = sys.modules.get(name)
    if existing is not None and [str(directory)] == list(getattr(existing, "__path__", [])):
        return
    if existing is not None:
        # A package of the same name from another root: forget it and everything under it.
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
    init = directory / "__init__.py"
    if init.exists():
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(directory)])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import package {name} from {directory}")
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    else:
        package = ModuleType(name)
        package.__path__ = [str(directory)]
        package.__package__ = name
        sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], child, package)
