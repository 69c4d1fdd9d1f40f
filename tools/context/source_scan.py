"""What a domain declares, read from its source with ``ast`` (never by importing it).

Reading the source rather than the live objects means a plugin that failed to boot still shows the
endpoints and events it declares, and a model file is described without executing it. Only what
is written literally can be read: ``add_endpoint("/users", "POST", ...)`` gives its method and
path, while a path built at run time shows as ``<dynamic>``.

* plugin files (``domains/<d>/plugins/*.py``): plugin classes (a base named ``BasePlugin``) with
  their injected tools and first doc line; ``add_endpoint``/``add_sse_endpoint`` calls (method,
  path, ``auth``, request model); ``publish``/``subscribe`` calls with a literal event name;
* model files (``domains/<d>/models/*.py``): every class with its bases, first doc line and
  annotated fields (``name: type`` with whether it has a default; a pydantic/dataclass
  ``Field(...)``/``field(...)`` counts as one only when it gives ``default`` or ``default_factory``).

A file that does not parse is reported with its syntax error instead of failing the scan.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

DYNAMIC = "<dynamic>"
ENDPOINT_CALLS = frozenset({"add_endpoint", "add_sse_endpoint"})
EVENT_CALLS = {"publish": "publishes", "subscribe": "subscribes"}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    auth: str
    """``none``, ``token``, ``admin`` or ``<dynamic>``."""
    request_model: str | None
    sse: bool
    owner: str
    """The class the call is written in (``<module>`` for module level)."""


@dataclass(frozen=True)
class PluginClass:
    name: str
    tools: tuple[str, ...]
    doc: str


@dataclass
class PluginFile:
    """What one plugin file declares."""

    relative: str
    classes: list[PluginClass] = field(default_factory=list)
    endpoints: list[Endpoint] = field(default_factory=list)
    publishes: set[str] = field(default_factory=set)
    subscribes: set[str] = field(default_factory=set)
    error: str | None = None


@dataclass(frozen=True)
class ModelField:
    name: str
    annotation: str
    has_default: bool


@dataclass(frozen=True)
class ModelClass:
    name: str
    bases: tuple[str, ...]
    doc: str
    fields: tuple[ModelField, ...]


@dataclass
class ModelFile:
    relative: str
    classes: list[ModelClass] = field(default_factory=list)
    error: str | None = None


def scan_plugin_file(path: Path, relative: str) -> PluginFile:
    result = PluginFile(relative)
    tree = _parse(path, result)
    if tree is None:
        return result
    _PluginVisitor(result).visit(tree)
    return result


def scan_model_file(path: Path, relative: str) -> ModelFile:
    result = ModelFile(relative)
    tree = _parse(path, result)
    if tree is None:
        return result
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            result.classes.append(_model_class(node))
    return result


def _parse(path: Path, result: PluginFile | ModelFile) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        result.error = f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return None


class _PluginVisitor(ast.NodeVisitor):
    def __init__(self, result: PluginFile) -> None:
        self.result = result
        self.owner = "<module>"

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(_dotted_tail(base) == "BasePlugin" for base in node.bases):
            self.result.classes.append(PluginClass(node.name, _init_parameters(node), _first_doc_line(node)))
        outer, self.owner = self.owner, node.name
        self.generic_visit(node)
        self.owner = outer

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name in ENDPOINT_CALLS:
            self.result.endpoints.append(self._endpoint(node, sse=name == "add_sse_endpoint"))
        elif name in EVENT_CALLS:
            event = _literal_str(_argument(node, 0, ("name", "event", "event_name")))
            if event is not None:
                (self.result.publishes if name == "publish" else self.result.subscribes).add(event)
        self.generic_visit(node)

    def _endpoint(self, node: ast.Call, *, sse: bool) -> Endpoint:
        path = _literal_str(_argument(node, 0, ("path",))) or DYNAMIC
        method = "GET" if sse else (_literal_str(_argument(node, 1, ("method",))) or DYNAMIC).upper()
        model = _argument(node, None, ("request_model",))
        return Endpoint(
            method=method,
            path=path,
            auth=_auth_mode(_argument(node, None, ("auth",))),
            request_model=_dotted_tail(model) if model is not None else None,
            sse=sse,
            owner=self.owner,
        )


def _argument(node: ast.Call, position: int | None, keywords: tuple[str, ...]) -> ast.expr | None:
    for keyword in node.keywords:
        if keyword.arg in keywords:
            return keyword.value
    if position is not None and position < len(node.args):
        argument = node.args[position]
        return None if isinstance(argument, ast.Starred) else argument
    return None


def _literal_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _auth_mode(node: ast.expr | None) -> str:
    if node is None:
        return "none"
    if isinstance(node, ast.Constant):
        if node.value is True:
            return "token"
        if node.value is False or node.value is None:
            return "none"
        if node.value == "admin":
            return "admin"
    return DYNAMIC


def _dotted_tail(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _dotted_tail(node.value)
    return DYNAMIC


def _init_parameters(node: ast.ClassDef) -> tuple[str, ...]:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            arguments = [*item.args.posonlyargs, *item.args.args, *item.args.kwonlyargs]
            return tuple(argument.arg for argument in arguments[1:])
    return ()


def _first_doc_line(node: ast.ClassDef | ast.Module) -> str:
    doc = ast.get_docstring(node)
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""


def _model_class(node: ast.ClassDef) -> ModelClass:
    fields: list[ModelField] = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields.append(ModelField(item.target.id, ast.unparse(item.annotation), _has_default(item.value)))
        elif isinstance(item, ast.Assign) and _is_enum(node):
            fields.extend(
                ModelField(target.id, "", True) for target in item.targets if isinstance(target, ast.Name)
            )
    return ModelClass(
        node.name, tuple(ast.unparse(base) for base in node.bases), _first_doc_line(node), tuple(fields)
    )


def _has_default(value: ast.expr | None) -> bool:
    """Whether a field is optional: ``x: int = 1`` is, ``x: int = Field(min_length=3)`` is not."""
    if value is None:
        return False
    if isinstance(value, ast.Call) and _dotted_tail(value.func) in ("Field", "field"):
        if value.args:
            first = value.args[0]
            return not (isinstance(first, ast.Constant) and first.value is Ellipsis)
        return any(keyword.arg in ("default", "default_factory") for keyword in value.keywords)
    return True


def _is_enum(node: ast.ClassDef) -> bool:
    return any(_dotted_tail(base).endswith("Enum") for base in node.bases)
