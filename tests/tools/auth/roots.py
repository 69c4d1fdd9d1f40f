"""Temporary project roots whose linked tools the kernel can discover.

``tests.kit.make_root`` links each tool directory as one symlink, and ``Path.rglob`` on Python 3.11
does not descend into symlinked directories, so the kernel would find no tool file in such a root.
:func:`make_linked_root` builds the same root but mirrors each linked tool as real directories of
per-file symlinks (the loader keeps link paths, so module names stay rooted at the temp root).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tests.kit import PROJECT, make_root


def make_linked_root(
    tmp_path: Path, *, tools: Iterable[str] = (), domains: Iterable[str] = (), name: str = "root"
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


def link_domain(root: Path, domain: str) -> None:
    """Link one more project domain into ``root`` (its ``plugins`` and ``models`` are read by glob)."""
    (root / "domains" / domain).symlink_to(PROJECT / "domains" / domain, target_is_directory=True)
