"""What a plugin can call on each tool: one extraction that the reference and AI_CONTEXT.md share.

Tools are found the way the kernel finds them (every ``tools/**/*.py`` imported by
:func:`core.loader.import_file`, each ``BaseTool`` subclass defined there with a ``name``), and
each public member is described from the tool's own code:

- *which* members: the functions and properties defined on the tool's class or a base other than
  ``BaseTool`` (an inherited ``chat`` counts), minus names starting with ``_`` and the kernel's
  lifecycle hooks. A class attribute that merely holds a function (``loop_factory``) is not a
  method of the tool and is left out;
- *how it is called*: ``async`` for a coroutine function (``await`` it), ``async for`` for an async
  generator, ``async with`` for a plain method whose return annotation names a class with
  ``__aenter__``, ``property`` for an attribute, else a plain call; the tool proxy keeps each
  method's kind, so this is what a plugin sees;
- *its signature as written*: parameter names, kinds, annotations and defaults are read from the
  function's source with ``ast`` (never from evaluated annotations), so the text is the same on
  every machine and whichever optional packages are installed;
- *what it does*: the first paragraph of its docstring.

The result is sorted (tools by name, members by name) so rendering it is deterministic.
"""

from __future__ import annotations

import ast
import inspect
import logging
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.base_tool import _LIFECYCLE, BaseTool
from core.loader import import_file

log = logging.getLogger("keel.context")

SYNC = "call"
ASYNC = "async"
ASYNC_ITERATOR = "async for"
ASYNC_CONTEXT = "async with"
PROPERTY = "property"


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str
    """``positional``, ``keyword`` (after ``*``), ``*args`` or ``**kwargs``; positional-only is
    shown as ``positional``."""
    annotation: str | None
    default: str | None


@dataclass(frozen=True)
class Member:
    name: str
    kind: str
    """One of :data:`SYNC`, :data:`ASYNC`, :data:`ASYNC_ITERATOR`, :data:`ASYNC_CONTEXT`, :data:`PROPERTY`."""
    parameters: tuple[Parameter, ...]
    returns: str | None
    doc: str

    def signature(self) -> str:
        """``name(a: int, *, b: str = 'x') -> bool`` as the source writes it (a property: ``name: T``)."""
        if self.kind == PROPERTY:
            return f"{self.name}: {self.returns}" if self.returns else self.name
        parts: list[str] = []
        star_written = False
        for parameter in self.parameters:
            if parameter.kind == "*args":
                star_written = True
            if parameter.kind == "keyword" and not star_written:
                parts.append("*")
                star_written = True
            parts.append(_parameter_text(parameter))
        returns = f" -> {self.returns}" if self.returns else ""
        return f"{self.name}({', '.join(parts)}){returns}"

    def call_form(self) -> str:
        """How a plugin writes the call: ``await db.query(...)``, ``async for ...``, or plain."""
        prefix = {ASYNC: "await ", ASYNC_ITERATOR: "async for x in ", ASYNC_CONTEXT: "async with "}
        return prefix.get(self.kind, "")


@dataclass(frozen=True)
class ToolInterface:
    name: str
    class_name: str
    source: str
    """The file defining the class, relative to the project root (``tools/db/db_tool.py``)."""
    doc: str
    members: tuple[Member, ...]


def tool_interfaces(root: Path) -> list[ToolInterface]:
    """Every tool under ``root/tools``, described; a file that does not import is logged and skipped."""
    found: dict[str, ToolInterface] = {}
    for path in _tool_files(root / "tools"):
        try:
            module = import_file(root, path)
        except Exception as exc:  # the kernel records it as a load error; the docs just skip it
            log.warning("tool file %s does not import (%s): left out of the reference", path, exc)
            continue
        for cls in vars(module).values():
            if not _is_tool_class(cls, module.__name__) or cls.name in found:
                continue
            found[cls.name] = describe_tool(cls, path.relative_to(root).as_posix())
    return [found[name] for name in sorted(found)]


def describe_tool(cls: type[BaseTool], source: str) -> ToolInterface:
    """The public interface of one tool class."""
    members = [
        member
        for name in sorted(dir(cls))
        if not name.startswith("_") and name not in _LIFECYCLE
        for member in [_describe_member(cls, name)]
        if member is not None
    ]
    return ToolInterface(cls.name, cls.__name__, source, first_paragraph(cls.__doc__), tuple(members))


def first_paragraph(doc: str | None) -> str:
    """The docstring's first paragraph on one line (``""`` when there is none)."""
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def _tool_files(directory: Path) -> list[Path]:
    found: list[Path] = []
    for folder, subfolders, files in os.walk(directory, followlinks=True):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        found.extend(Path(folder, n) for n in files if n.endswith(".py") and not n.startswith("test_"))
    return sorted(found)


def _is_tool_class(value: Any, module_name: str) -> bool:
    return (
        isinstance(value, type)
        and issubclass(value, BaseTool)
        and value is not BaseTool
        and value.__module__ == module_name
        and bool(value.name)
    )


def _owner_of(cls: type, name: str) -> tuple[type, Any] | None:
    """The class of the MRO whose ``__dict__`` defines ``name``, with that raw attribute."""
    for klass in cls.__mro__:
        if name in vars(klass):
            if klass in (BaseTool, object):
                return None
            return klass, vars(klass)[name]
    return None


def _describe_member(cls: type, name: str) -> Member | None:
    owned = _owner_of(cls, name)
    if owned is None:
        return None
    klass, raw = owned
    if isinstance(raw, property):
        getter = raw.fget
        if getter is None:
            return None
        node = _function_node(getter)
        returns = ast.unparse(node.returns) if node is not None and node.returns is not None else None
        return Member(name, PROPERTY, (), returns, first_paragraph(getter.__doc__))
    function = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    if not inspect.isfunction(function) or function.__qualname__ != f"{klass.__qualname__}.{name}":
        return None  # a class attribute holding some other function, not a method of the tool
    node = _function_node(function)
    if node is None:
        return None
    skip_first = not isinstance(raw, staticmethod)
    parameters = _parameters(node.args, skip_first)
    returns = ast.unparse(node.returns) if node.returns is not None else None
    return Member(name, _kind(function, returns), parameters, returns, first_paragraph(function.__doc__))


def _function_node(function: Callable[..., Any]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return None


def _parameters(arguments: ast.arguments, skip_first: bool) -> tuple[Parameter, ...]:
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += arguments.defaults
    result = [
        Parameter(a.arg, "positional", _annotation(a), _default(d))
        for a, d in zip(positional, defaults, strict=True)
    ]
    if skip_first and result:
        result = result[1:]
    if arguments.vararg is not None:
        result.append(Parameter(arguments.vararg.arg, "*args", _annotation(arguments.vararg), None))
    result += [
        Parameter(a.arg, "keyword", _annotation(a), _default(d))
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    if arguments.kwarg is not None:
        result.append(Parameter(arguments.kwarg.arg, "**kwargs", _annotation(arguments.kwarg), None))
    return tuple(result)


def _annotation(argument: ast.arg) -> str | None:
    return ast.unparse(argument.annotation) if argument.annotation is not None else None


def _default(node: ast.expr | None) -> str | None:
    return ast.unparse(node) if node is not None else None


def _kind(function: Callable[..., Any], returns: str | None) -> str:
    if inspect.isasyncgenfunction(function):
        return ASYNC_ITERATOR
    if inspect.iscoroutinefunction(function):
        return ASYNC
    if returns is not None:
        returned = getattr(function, "__globals__", {}).get(returns.strip("'\""))
        if isinstance(returned, type) and hasattr(returned, "__aenter__"):
            return ASYNC_CONTEXT
    return SYNC


def _parameter_text(parameter: Parameter) -> str:
    prefix = {"*args": "*", "**kwargs": "**"}.get(parameter.kind, "")
    text = f"{prefix}{parameter.name}"
    if parameter.annotation is not None:
        text += f": {parameter.annotation}"
        if parameter.default is not None:
            text += f" = {parameter.default}"
    elif parameter.default is not None:
        text += f"={parameter.default}"
    return text
