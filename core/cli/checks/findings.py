"""The vocabulary shared by the checks: a finding, the facts about the tools, the file checked, and
the one reading of an assignment they all make."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Finding:
    """One mistake, printed as ``path:line: message`` so editors can jump to it."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Facts:
    """What the project's tools tell the checks: kept apart so the checks themselves never import
    a tool (and tests can state the facts outright)."""

    parameters: frozenset[str]
    """Every ``__init__`` parameter name the kernel can inject: the tools' names and its own."""
    coroutines: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Tool name -> the public methods of that tool that are coroutine functions."""
    system_domains: frozenset[str] = frozenset()
    """Domains that may also serve under :attr:`system_prefix` (``HTTP_SYSTEM_DOMAINS``)."""
    system_prefix: str = "/system"


@dataclass(frozen=True)
class PluginFile:
    """Where a file sits: ``shown`` is the path printed, ``module`` its dotted name under the root
    (``None`` outside it: relative imports are then not resolved) and ``domain`` its domain
    (``None`` when it is in none: the domain checks are skipped)."""

    shown: str
    module: str | None
    domain: str | None


def assignment(node: ast.AST) -> tuple[list[ast.expr], ast.expr] | None:
    """``(targets, value)`` of ``node`` if it assigns a value (``x = ...``, also ``x: T = ...``):
    plugins annotate their assignments as often as not, and a check must read both alike."""
    if isinstance(node, ast.Assign):
        return node.targets, node.value
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [node.target], node.value
    return None
