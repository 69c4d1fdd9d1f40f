"""Architecture guards: what ``core`` may import, and what nothing may import.

Walks the source with ``ast`` (not ``sys.modules``), so an import nested in a function, or one
that only runs on some code path, is caught as well.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.kit import PROJECT

CORE = PROJECT / "core"


def imports_of(path: Path, root: Path = PROJECT) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                if node.module:
                    yield node.lineno, ".".join([*base, node.module])
                else:
                    for alias in node.names:
                        yield node.lineno, ".".join([*base, alias.name])
            else:
                yield node.lineno, node.module or ""


def python_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.py") if "__pycache__" not in p.parts)


def test_core_imports_only_the_standard_library_and_itself() -> None:
    offenders = [
        f"{path.relative_to(PROJECT)}:{line}: {module}"
        for path in python_files(CORE)
        for line, module in imports_of(path)
        if module.split(".")[0] not in sys.stdlib_module_names and module.split(".")[0] != "core"
    ]
    assert offenders == []


def test_contracts_and_serialization_import_nothing_else_from_core() -> None:
    allowed = ("core.contracts", "core.serialization")
    offenders = [
        f"{path.relative_to(PROJECT)}:{line}: {module}"
        for package in ("contracts", "serialization")
        for path in python_files(CORE / package)
        for line, module in imports_of(path)
        if module.split(".")[0] == "core" and not module.startswith(allowed)
    ]
    assert offenders == []


def test_production_code_never_imports_core_testing() -> None:
    production = [
        path
        for directory in ("core", "tools", "domains")
        for path in python_files(PROJECT / directory)
        if not path.is_relative_to(CORE / "testing")
    ]
    offenders = [
        f"{path.relative_to(PROJECT)}:{line}"
        for path in production
        for line, module in imports_of(path)
        if module.startswith("core.testing")
    ]
    assert offenders == []


# tools/_shared holds what several tools need (the PostgreSQL pool bootstrap): every tool may import
# it, and it imports no tool, so sharing it never couples one tool to another.
SHARED = "_shared"


def test_tools_never_import_each_other_or_plugins() -> None:
    offenders = []
    for path in python_files(PROJECT / "tools"):
        own = path.relative_to(PROJECT / "tools").parts[0]
        for line, module in imports_of(path):
            parts = module.split(".")
            if parts[0] == "domains" or (
                parts[0] == "tools" and len(parts) > 1 and parts[1] not in (own, SHARED)
            ):
                offenders.append(f"{path.relative_to(PROJECT)}:{line}: {module}")
    assert offenders == []


def test_the_shared_tools_folder_defines_no_tool_and_imports_no_tool() -> None:
    offenders = [
        f"{path.relative_to(PROJECT)}:{line}: {module}"
        for path in python_files(PROJECT / "tools" / SHARED)
        for line, module in imports_of(path)
        if module.startswith("tools.") and not module.startswith(f"tools.{SHARED}")
    ]
    assert offenders == []
    for path in python_files(PROJECT / "tools" / SHARED):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bases = [
            ast.unparse(b) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for b in node.bases
        ]
        assert "BaseTool" not in bases, path


def test_plugins_never_import_tools_or_other_domains() -> None:
    offenders = []
    for path in python_files(PROJECT / "domains"):
        own = path.relative_to(PROJECT / "domains").parts[0]
        for line, module in imports_of(path):
            parts = module.split(".")
            if parts[0] == "tools" or (parts[0] == "domains" and len(parts) > 1 and parts[1] != own):
                offenders.append(f"{path.relative_to(PROJECT)}:{line}: {module}")
    assert offenders == []


def test_the_guard_itself_catches_nested_and_relative_imports(tmp_path: Path) -> None:
    sample = tmp_path / "core" / "probe.py"
    sample.parent.mkdir()
    sample.write_text("def f():\n    import httpx\n    from . import kernel\n    from .x import y\n")
    assert list(imports_of(sample, tmp_path)) == [(2, "httpx"), (3, "core.kernel"), (4, "core.x")]
