"""Routes a plugin registers outside its domain's prefix.

A domain's routes live under ``/<domain>/`` (``keel new`` scaffolds them there), so two domains
never compete for a path and a path says who answers it; ``/system/`` belongs to the system domains
(the http tool's ``HTTP_SYSTEM_DOMAINS``), which the http tool enforces at boot, and this reports
before it. Registrations are the http tool's ``add_endpoint``, ``add_sse_endpoint`` and ``add_page``
called on any receiver or through a local alias (``add = self.http.add_endpoint``); the path is
followed when it is a literal, a module-level string constant, or the literal start of an f-string or
a ``+`` (a path computed otherwise is not checked).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from core.cli.checks.findings import Facts, Finding, PluginFile, assignment

REGISTRATIONS = frozenset({"add_endpoint", "add_sse_endpoint", "add_page"})


def check(tree: ast.Module, where: PluginFile, facts: Facts) -> list[Finding]:
    if where.domain is None:
        return []
    constants = _string_constants(tree)
    prefixes = [f"/{where.domain}"]
    if where.domain in facts.system_domains and facts.system_prefix not in prefixes:
        prefixes.append(facts.system_prefix)
    found: list[Finding] = []
    for call in _registrations(tree):
        path, whole = _path_of(_path_argument(call), constants)
        if path is not None and not _inside(path, whole, prefixes):
            found.append(
                Finding(where.shown, call.lineno, _outside(path, whole, where.domain, prefixes, facts))
            )
    return found


def _path_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "path"), None)


def _outside(path: str, whole: bool, domain: str, prefixes: list[str], facts: Facts) -> str:
    allowed = " or ".join(f"{p}/" for p in prefixes)
    message = f"route {path!r}{'' if whole else '...'} is outside the {domain} domain's prefix {allowed}"
    if _inside(path, whole, [facts.system_prefix]):
        owners = ", ".join(sorted(facts.system_domains))
        message += f" ({facts.system_prefix}/ belongs to the system domains: {owners})"
    return message


def _inside(path: str, whole: bool, prefixes: list[str]) -> bool:
    """Whether ``path`` (or, when not ``whole``, every path starting so) is under one of ``prefixes``;
    a start too short to tell (``f"/{name}"``) counts as inside."""
    for prefix in prefixes:
        if path == prefix or path.startswith(prefix + "/"):
            return True
        if not whole and prefix.startswith(path):
            return True
    return False


def _registrations(tree: ast.Module) -> Iterator[ast.Call]:
    aliases = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_registration(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (
            _is_registration(node.func) or (isinstance(node.func, ast.Name) and node.func.id in aliases)
        ):
            yield node


def _is_registration(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in REGISTRATIONS


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "..."`` (also annotated), which paths are often kept in."""
    constants: dict[str, str] = {}
    for node in tree.body:
        if (assigned := assignment(node)) is None:
            continue
        targets, value = assigned
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            constants.update((t.id, value.value) for t in targets if isinstance(t, ast.Name))
    return constants


def _path_of(node: ast.expr | None, constants: dict[str, str]) -> tuple[str | None, bool]:
    """``(path, whole)``: the path, or only its literal start (``whole`` false); ``None`` if unknown."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, True
    if isinstance(node, ast.Name):
        return constants.get(node.id), True
    if isinstance(node, ast.JoinedStr):
        start = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return start or None, False
            start += part.value
        return start, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _path_of(node.left, constants)[0], False
    return None, False
