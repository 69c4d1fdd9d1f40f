"""Typed agent output: parse the final answer strictly, and build a tolerant partial while it streams.

An ``Agent`` declared with ``output_type=`` gets ``AgentResult.parsed`` (an instance of that type)
and ``StreamEvent.partial_output`` on its token events. Supported types:

* a pydantic model, recognised by duck typing (``model_validate`` / ``model_construct``) because
  ``core`` does not import pydantic: the strict parse is ``model_validate``, the partial one
  ``model_construct`` with only the fields that have arrived (so ``model_fields_set`` tells which);
* a dataclass: the strict parse calls the constructor with the JSON object's members; the partial one
  is made without ``__init__`` and holds only the fields that have arrived, so an absent field
  raises ``AttributeError`` (read it with ``getattr(obj, "field", None)``);
* ``dict``: the JSON object itself.

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

__all__ = ["OutputSpec", "OutputTypeError"]

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
    """``output_type`` is not a pydantic model, a dataclass or ``dict``."""


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


class OutputSpec:
    """How one output type is advertised, parsed strictly, and built partially."""

    __slots__ = ("_field_names", "_last_fields", "kind", "style")

    def __init__(self, kind: Any) -> None:
        if kind is dict:
            style = "dict"
        elif _is_pydantic(kind):
            style = "pydantic"
        elif isinstance(kind, type) and dataclasses.is_dataclass(kind):
            style = "dataclass"
        else:
            raise OutputTypeError(f"output_type must be a pydantic model, a dataclass or dict, got {kind!r}")
        self.kind = kind
        self.style = style
        self._field_names: frozenset[str] | None = (
            frozenset(f.name for f in dataclasses.fields(kind)) if style == "dataclass" else None
        )
        self._last_fields: dict[str, Any] | None = None

    def response_format(self) -> dict[str, Any]:
        """The ``response_format`` a request carries for this type."""
        if self.style == "dict":
            return {"type": "json_object"}
        schema = self.kind.model_json_schema() if self.style == "pydantic" else _dataclass_schema(self.kind)
        return {"type": "json_schema", "json_schema": {"name": self.kind.__name__, "schema": schema}}

    def parse(self, text: str) -> Any:
        """The complete answer as an instance of the type; raises ``ValueError`` / the type's error."""
        data = strict_json(text)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if self.style == "dict":
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
        if self.style == "dict":
            return dict(fields)
        if self.style == "pydantic":
            return self.kind.model_construct(**fields)
        names = self._field_names or frozenset()
        instance = object.__new__(self.kind)
        for name, value in fields.items():
            if name in names:
                object.__setattr__(instance, name, value)
        return instance
