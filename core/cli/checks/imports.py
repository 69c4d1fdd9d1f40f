"""Imports a plugin must not make: another domain's code, and any tool's code.

Domains stay independent so one can be removed, reloaded or moved without the others noticing:
what they share goes through a tool (the event bus, the store) or ``core``. A plugin gets its tools
by injection, so importing ``tools.*`` couples it to one implementation and, under live reload, to a
second copy of the module that is not the instance it was given; a type belongs in
``core.tool_ports``. Relative imports are resolved against the file's place in the root.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from core.cli.checks.findings import Finding, PluginFile


def check(tree: ast.Module, where: PluginFile) -> list[Finding]:
    found: list[Finding] = []
    for node, target in _imported(tree, where):
        problem = _problem(target, where.domain)
        if problem:
            found.append(Finding(where.shown, node.lineno, problem))
    return found


def _problem(target: str, domain: str | None) -> str | None:
    parts = target.split(".")
    if parts[0] == "tools":
        return (
            f"imports {target}: plugins get tools by injection (an __init__ parameter named after the "
            "tool), and type them with core.tool_ports"
        )
    if parts[0] == "domains" and len(parts) > 1 and domain is not None and parts[1] != domain:
        return (
            f"imports {target} from the {parts[1]} domain: domains do not import each other "
            "(share through a tool such as the event bus, or through core)"
        )
    return None


def _imported(tree: ast.Module, where: PluginFile) -> Iterator[tuple[ast.stmt, str]]:
    """``(statement, dotted name)`` for every module (or ``from`` name) each import statement names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, where.module)
            if base is None:
                continue
            if base in ("domains", "tools"):  # `from domains import other`: the names are the modules
                for alias in node.names:
                    yield node, f"{base}.{alias.name}"
            else:
                yield node, base


def _absolute(node: ast.ImportFrom, module: str | None) -> str | None:
    if not node.level:
        return node.module
    if module is None:
        return None
    package = module.split(".")[:-1]  # a plugin file is a module, never a package's __init__
    if node.level - 1 > len(package):
        return None
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])]) or None
