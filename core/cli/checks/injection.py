"""What a plugin asks the kernel for, and how it calls what it gets.

The kernel injects ``__init__`` parameters by name (:mod:`core.base_plugin`): a required parameter
that names no tool makes the plugin DEAD at boot, and an optional one is silently ``None`` forever,
so a misspelt optional tool (``schedular=None``) is reported when it is close to a real name (an
optional parameter naming nothing close may be a tool this deployment does not install).

A tool coroutine called as a bare statement (``self.db.execute(...)`` with no ``await``) never
runs: Python only warns, at garbage collection, that it was never awaited. The receivers followed
are the injected parameter itself (in ``__init__``), ``self.<attr>`` assigned from it in
``__init__``, and a local ``name = self.<attr>`` in any method.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator, Mapping

from core.cli.checks.findings import Facts, Finding, PluginFile, assignment

Function = ast.FunctionDef | ast.AsyncFunctionDef


def check(tree: ast.Module, where: PluginFile, facts: Facts) -> list[Finding]:
    found: list[Finding] = []
    inits: dict[str, Function] = {}  # a plugin class of the file -> the __init__ it runs
    for cls in plugin_classes(tree):
        own = _method(cls, "__init__")
        inherited = (inits.get(_base_name(base) or "") for base in cls.bases)
        init = own or next((i for i in inherited if i is not None), None)
        if init is None:
            continue
        inits[cls.name] = init
        if own is not None:
            found.extend(_unknown_parameters(own, where, facts))
        found.extend(_unawaited(cls, init, where, facts))
    return found


def plugin_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """Top-level classes deriving from ``BasePlugin``, directly or through another class of the file."""
    plugins: list[ast.ClassDef] = []
    names: set[str] = {"BasePlugin"}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(_base_name(base) in names for base in node.bases):
            plugins.append(node)
            names.add(node.name)
    return plugins


def _base_name(base: ast.expr) -> str | None:
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def _method(cls: ast.ClassDef, name: str) -> Function | None:
    return next((n for n in cls.body if isinstance(n, Function) and n.name == name), None)


def _parameters(init: Function) -> Iterator[tuple[ast.arg, bool]]:
    """``(parameter, required)`` after ``self``, as the kernel reads them (no ``*args``/``**kw``)."""
    arguments = init.args
    positional = [*arguments.posonlyargs, *arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    for index, arg in enumerate(positional):
        if index:
            yield arg, index < first_default
    for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        yield arg, default is None


def _unknown_parameters(init: Function, where: PluginFile, facts: Facts) -> Iterator[Finding]:
    known = sorted(facts.parameters)
    for arg, required in _parameters(init):
        if arg.arg in facts.parameters:
            continue
        close = difflib.get_close_matches(arg.arg, known, n=1)
        if not required and not close:
            continue
        message = f"__init__ parameter {arg.arg!r} names no tool of this project"
        if close:
            message += f"; did you mean {close[0]!r}?"
        else:
            message += " (the kernel injects tools by parameter name; give it a default if it is optional)"
        yield Finding(where.shown, arg.lineno, message)


def _unawaited(cls: ast.ClassDef, init: Function, where: PluginFile, facts: Facts) -> Iterator[Finding]:
    tools = {arg.arg: arg.arg for arg, _ in _parameters(init) if arg.arg in facts.coroutines}
    attributes = _attributes_of(init, tools)
    for function in (n for n in cls.body if isinstance(n, Function)):  # nested ones are walked with it
        names = dict(tools) if function is init else {}
        names.update(_aliases(function, attributes))
        for statement in ast.walk(function):
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
                continue
            call = statement.value.func
            if not isinstance(call, ast.Attribute):
                continue
            tool = _tool_of(call.value, names, attributes)
            if tool is not None and call.attr in facts.coroutines[tool]:
                shown = f"{ast.unparse(call)}(...)"
                yield Finding(
                    where.shown,
                    statement.lineno,
                    f"{shown} is a coroutine of the {tool} tool and is never awaited (write await {shown})",
                )


def _attributes_of(init: Function, tools: Mapping[str, str]) -> dict[str, str]:
    """``self.<attr>`` -> tool, for each ``self.<attr> = <tool parameter>`` in ``__init__``."""
    attributes: dict[str, str] = {}
    for node in ast.walk(init):
        if (assigned := assignment(node)) is None:
            continue
        targets, value = assigned
        if isinstance(value, ast.Name) and value.id in tools:
            for target in targets:
                if (attribute := _self_attribute(target)) is not None:
                    attributes[attribute] = tools[value.id]
    return attributes


def _aliases(function: Function, attributes: Mapping[str, str]) -> dict[str, str]:
    """Local names bound to a tool attribute: ``http = self.http``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and (tool := attributes.get(_self_attribute(node.value) or "")):
            aliases.update((target.id, tool) for target in node.targets if isinstance(target, ast.Name))
    return aliases


def _tool_of(receiver: ast.expr, names: Mapping[str, str], attributes: Mapping[str, str]) -> str | None:
    if isinstance(receiver, ast.Name):
        return names.get(receiver.id)
    return attributes.get(_self_attribute(receiver) or "")


def _self_attribute(node: ast.expr) -> str | None:
    """``attr`` when ``node`` is ``self.attr``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None
