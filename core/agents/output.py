"""Typed agent output: parse the final answer strictly, and build a tolerant partial while it streams.

An ``Agent`` declared with ``output_type=`` gets ``AgentResult.parsed`` (an instance of that type)
and ``StreamEvent.partial_output`` on its token events. Supported types:

* a pydantic model, recognised by duck typing (``model_validate`` / ``model_construct``) because
  ``core`` does not import pydantic: the strict parse is ``model_validate``, the partial one
  ``model_construct`` with only the fields that have arrived (so ``model_fields_set`` tells which);
* a dataclass: the strict parse calls the constructor with the JSON object's members; the partial one
  is made without ``__init__`` and holds only the fields that have arrived, so an absent field
  raises ``AttributeError`` (read it with ``getattr(obj, "field", None)``);
* an attrs class, recognised by its ``__attrs_attrs__`` (``core`` does not import attrs): the strict
  parse calls the constructor (so attrs' own validators run); the partial one is made like a
  dataclass's, without ``__init__``, holding only the fields that have arrived;
* a raw JSON Schema (a mapping with ``"type": "object"`` or ``"properties"``): the answer is the JSON
  object itself, checked against the schema's ``required`` members and the primitive ``type`` of each
  declared property (no more than that: ``core`` ships no JSON Schema engine);
* ``dict``: the JSON object itself.

``SchemaAdapter`` is the public name; ``OutputSpec`` is the same class.

A partial is only produced when the fields read so far changed since the previous token, and is
``None`` otherwise: hold the last non-``None`` value. The request advertises the schema through
``response_format`` (pydantic's own JSON schema, or one built from a dataclass's field types).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from core.agents._partial_json import partial_object, strict_json

__all__ = ["OutputSpec", "OutputTypeError", "SchemaAdapter"]

_JSON_TYPES: Mapping[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}


class OutputTypeError(TypeError):
    """``output_type`` is not a pydantic model, a dataclass, an attrs class, a JSON Schema or ``dict``."""


_PRIMITIVES: Mapping[str, Any] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def _is_attrs(kind: Any) -> bool:
    return isinstance(kind, type) and hasattr(kind, "__attrs_attrs__")


def _is_json_schema(kind: Any) -> bool:
    return isinstance(kind, Mapping) and (kind.get("type") == "object" or "properties" in kind)


def _attrs_required(attribute: Any) -> bool:
    # attrs marks "no default" with its NOTHING sentinel, whose repr is "NOTHING".
    return repr(getattr(attribute, "default", None)) == "NOTHING"


def _attrs_schema(kind: type) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(kind)
    except Exception:
        hints = {}
    attributes = kind.__attrs_attrs__  # type: ignore[attr-defined]
    return {
        "type": "object",
        "properties": {a.name: _field_schema(hints.get(a.name, a.type or Any)) for a in attributes},
        "required": [a.name for a in attributes if _attrs_required(a)],
    }


def _matches(value: Any, type_name: Any) -> bool:
    names = type_name if isinstance(type_name, list) else [type_name]
    for name in names:
        expected = _PRIMITIVES.get(name)
        if expected is None:
            return True  # a type this checker does not know is not refused
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, expected):
            return True
    return False


def _check_schema(schema: Mapping[str, Any], data: dict[str, Any]) -> None:
    problems = [
        f"missing required member {name!r}" for name in schema.get("required", ()) if name not in data
    ]
    properties = schema.get("properties") or {}
    for name, rule in properties.items():
        if (
            name in data
            and isinstance(rule, Mapping)
            and "type" in rule
            and not _matches(data[name], rule["type"])
        ):
            problems.append(f"member {name!r} should be {rule['type']}, got {type(data[name]).__name__}")
    if problems:
        raise ValueError("the answer does not match the schema: " + "; ".join(problems))


def _is_pydantic(kind: Any) -> bool:
    return callable(getattr(kind, "model_validate", None)) and callable(
        getattr(kind, "model_construct", None)
    )


def _field_schema(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation) or annotation
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_field_schema(arg) for arg in typing.get_args(annotation)]}
    if annotation is type(None):
        return {"type": "null"}
    name = _JSON_TYPES.get(origin)
    return {"type": name} if name is not None else {}


def _dataclass_schema(kind: type) -> dict[str, Any]:
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(kind)
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    return {
        "type": "object",
        "properties": {f.name: _field_schema(hints.get(f.name, Any)) for f in fields},
        "required": required,
    }


class SchemaAdapter:
    """How one output type is advertised, parsed strictly, and built partially."""

    __slots__ = ("_field_names", "_last_fields", "kind", "style")

    def __init__(self, kind: Any) -> None:
        if kind is dict:
            style = "dict"
        elif _is_pydantic(kind):
            style = "pydantic"
        elif isinstance(kind, type) and dataclasses.is_dataclass(kind):
            style = "dataclass"
        elif _is_attrs(kind):
            style = "attrs"
        elif _is_json_schema(kind):
            style = "schema"
        else:
            raise OutputTypeError(
                "output_type must be a pydantic model, a dataclass, an attrs class, a JSON Schema "
                f"(a mapping with properties) or dict, got {kind!r}"
            )
        self.kind = kind
        self.style = style
        names: frozenset[str] | None = None
        if style == "dataclass":
            names = frozenset(f.name for f in dataclasses.fields(kind))
        elif style == "attrs":
            names = frozenset(a.name for a in kind.__attrs_attrs__)
        self._field_names = names
        self._last_fields: dict[str, Any] | None = None

    def response_format(self) -> dict[str, Any]:
        """The ``response_format`` a request carries for this type."""
        if self.style == "dict":
            return {"type": "json_object"}
        if self.style == "schema":
            name = str(self.kind.get("title") or "output")
            return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(self.kind)}}
        if self.style == "pydantic":
            schema = self.kind.model_json_schema()
        elif self.style == "attrs":
            schema = _attrs_schema(self.kind)
        else:
            schema = _dataclass_schema(self.kind)
        return {"type": "json_schema", "json_schema": {"name": self.kind.__name__, "schema": schema}}

    def parse(self, text: str) -> Any:
        """The complete answer as an instance of the type; raises ``ValueError`` / the type's error."""
        data = strict_json(text)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if self.style == "dict":
            return data
        if self.style == "schema":
            _check_schema(self.kind, data)
            return data
        if self.style == "pydantic":
            return self.kind.model_validate(data)
        return self.kind(**data)

    def reset(self) -> None:
        """Forget the fields seen so far (a new model turn starts)."""
        self._last_fields = None

    def partial(self, text_so_far: str) -> Any:
        """A partial instance when the fields read from ``text_so_far`` changed, else ``None``."""
        fields = partial_object(text_so_far)
        if fields is None or fields == self._last_fields:
            return None
        self._last_fields = fields
        if self.style in ("dict", "schema"):
            return dict(fields)
        if self.style == "pydantic":
            return self.kind.model_construct(**fields)
        names = self._field_names or frozenset()
        instance = object.__new__(self.kind)
        for name, value in fields.items():
            if name in names:
                object.__setattr__(instance, name, value)
        return instance


OutputSpec = SchemaAdapter
