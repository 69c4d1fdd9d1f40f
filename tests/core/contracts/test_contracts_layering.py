"""core.contracts and core.serialization sit at the bottom: stdlib only, and one direction.

core.serialization imports nothing from core; core.contracts imports only itself and
core.serialization. Checked on the source with ast, so imports nested in functions or behind
TYPE_CHECKING count too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.kit import PROJECT

ALLOWED_CORE_IMPORTS = {
    "serialization": ("core.serialization",),
    "contracts": ("core.contracts", "core.serialization"),
}


def imported_modules(path: Path, root: Path) -> list[str]:
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.append(".".join([*base, node.module] if node.module else base))
            else:
                found.append(node.module or "")
    return found


def offenders(package: str, root: Path = PROJECT) -> list[str]:
    allowed = ALLOWED_CORE_IMPORTS[package]
    bad = []
    for path in sorted((root / "core" / package).rglob("*.py")):
        for module in imported_modules(path, root):
            top = module.split(".")[0]
            if top == "core":
                if not any(module == a or module.startswith(a + ".") for a in allowed):
                    bad.append(f"{path.name}: {module}")
            elif top not in sys.stdlib_module_names:
                bad.append(f"{path.name}: {module}")
    return bad


def test_serialization_imports_only_the_standard_library() -> None:
    assert offenders("serialization") == []


def test_contracts_import_only_the_standard_library_and_serialization() -> None:
    assert offenders("contracts") == []


def test_the_check_sees_nested_relative_and_type_checking_imports(tmp_path: Path) -> None:
    probe = tmp_path / "core" / "serialization" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from core.contracts import types\n"
        "def f():\n    import pydantic\n    from ..runtime import x\n    from . import _immutable\n"
    )
    assert offenders("serialization", tmp_path) == [
        "probe.py: core.contracts",
        "probe.py: pydantic",
        "probe.py: core.runtime",
    ]
