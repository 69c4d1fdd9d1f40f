"""Where a root's tools and plugins are: the files, and the classes defined in them."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any


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
    seen: set[str] = set()
    for folder, subfolders, files in os.walk(directory, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree: walked already, and walking it again never ends
            subfolders[:] = []
            continue
        seen.add(real)
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
        and not inspect.isabstract(obj)
    ]
