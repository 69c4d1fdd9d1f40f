"""Temporary project roots for service tests: the project's own tools and domains, linked file by file.

``tests.kit.make_root`` links each tool directory as a single symlink, and ``Path.rglob`` on Python
3.11 does not descend into a symlinked directory, so the kernel would discover no tool in it.
:func:`service_root` links every tool file instead (the loader keeps link paths, so modules are still
named after the temporary root); domains stay linked whole (plugins are found with a plain glob).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tests.kit import PROJECT, make_root


def service_root(
    tmp_path: Path,
    *,
    tools: Iterable[str] = ("http", "logger", "system"),
    domains: Iterable[str] = ("system",),
    name: str = "root",
) -> Path:
    root = make_root(tmp_path, domains=domains, name=name)
    for tool in tools:
        source = PROJECT / "tools" / tool
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            target = root / "tools" / tool / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    return root
