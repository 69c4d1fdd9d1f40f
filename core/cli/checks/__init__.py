"""Static checks on one plugin file, for ``keel check``: the mistakes boot would find late or never.

Each concern is a module of its own working on the file's syntax tree (nothing is imported or
run): :mod:`.injection` (``__init__`` parameters that name no tool, tool coroutines called without
``await``), :mod:`.imports` (another domain's code, a tool's code) and :mod:`.routes` (a route
outside the domain's prefix). What the checks need to know about the project's tools comes in as
:class:`Facts`, gathered once by :mod:`.facts`.
"""

from __future__ import annotations

import ast

from core.cli.checks import imports, injection, routes
from core.cli.checks.findings import Facts, Finding, PluginFile

__all__ = ["Facts", "Finding", "PluginFile", "check_source"]


def check_source(source: str, where: PluginFile, facts: Facts) -> list[Finding]:
    """Every finding in one file's ``source``, in line order; a syntax error is the only finding."""
    try:
        tree = ast.parse(source, filename=where.shown)
    except SyntaxError as exc:
        return [Finding(where.shown, exc.lineno or 1, f"syntax error: {exc.msg}")]
    found = [
        *imports.check(tree, where),
        *injection.check(tree, where, facts),
        *routes.check(tree, where, facts),
    ]
    return sorted(found)
