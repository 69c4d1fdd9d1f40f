"""A ratchet over every public value type in core.contracts.types and core.contracts.ports.

The types are found by walking the modules, not listed by hand, so a new dataclass or a new
container field is checked the day it is added: it must be frozen, its container payloads must
be frozen (deeply, and copied) after construction from plain containers, and it must stay
hashable, picklable, deep-copyable and equal to its round trips.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import enum
import inspect
import pickle
import types
import typing
from typing import Any

import pytest

import core.contracts.ports as ports_module
import core.contracts.protocols as protocols_module
import core.contracts.types as types_module
from core.serialization import FrozenDict, FrozenList

MODULES = (types_module, ports_module)
CONTAINER_ORIGINS = {
    dict,
    list,
    tuple,
    set,
    collections.abc.Mapping,
    collections.abc.MutableMapping,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
}
NAMESPACE = {**vars(typing), **vars(types_module), **vars(ports_module), **vars(protocols_module)}


def public_dataclasses() -> list[type]:
    found = []
    for module in MODULES:
        for name, value in vars(module).items():
            if (
                not name.startswith("_")
                and inspect.isclass(value)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, globalns=NAMESPACE)


def strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def is_container(annotation: Any) -> bool:
    annotation = strip_optional(annotation)
    return (typing.get_origin(annotation) or annotation) in CONTAINER_ORIGINS


def sample(annotation: Any) -> Any:
    """A plain (mutable, unfrozen) example value for an annotation."""
    annotation = strip_optional(annotation)
    origin = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return {"key": {"nested": ["value"]}, "other": [1, {"deep": 2}]}
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence):
        return [sample(args[0]) if args else "item"]
    if annotation is Any:
        return "opaque"
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return next(iter(annotation))
    if annotation in (str, int, float, bool):
        return annotation("1") if annotation is not bool else True
    if inspect.isclass(annotation) and dataclasses.is_dataclass(annotation):
        return build(annotation)
    if inspect.isclass(annotation) and getattr(annotation, "_is_protocol", False):
        return None
    raise AssertionError(f"no sample for {annotation!r}: extend sample()")


def plain_arguments(cls: type) -> dict[str, Any]:
    fields = dataclasses.fields(cls)
    return {f.name: sample(hint) for f, hint in zip(fields, hints(cls).values(), strict=True)}


def build(cls: type, overrides: dict[str, Any] | None = None) -> Any:
    """An instance with every field set, containers as plain dicts and lists."""
    kwargs = plain_arguments(cls)
    kwargs.update(overrides or {})
    return cls(**kwargs)


def deeply_frozen(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(deeply_frozen(v) for v in value.values())
    if isinstance(value, list):
        return type(value) is FrozenList and all(deeply_frozen(v) for v in value)
    if isinstance(value, tuple):
        return all(deeply_frozen(v) for v in value)
    return True


def frozen_field_problems(cls: type) -> list[str]:
    problems = []
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        problems.append(f"{cls.__name__} is not frozen")
    kwargs = plain_arguments(cls)
    instance = cls(**kwargs)
    for name, hint in hints(cls).items():
        if not is_container(hint):
            continue
        given, stored = kwargs[name], getattr(instance, name)
        if isinstance(stored, (list, dict)) and type(stored) not in (FrozenList, FrozenDict):
            problems.append(f"{cls.__name__}.{name} holds a mutable {type(stored).__name__}")
        elif not deeply_frozen(stored):
            problems.append(f"{cls.__name__}.{name} is not frozen all the way down")
        elif stored is given:
            problems.append(f"{cls.__name__}.{name} keeps the caller's container")
        elif stored != given and stored != tuple(given):
            problems.append(f"{cls.__name__}.{name} changed value while freezing")
    return problems


VALUE_TYPES = public_dataclasses()
IDS = [cls.__name__ for cls in VALUE_TYPES]


def test_the_enumeration_finds_the_value_types_with_payloads() -> None:
    names = set(IDS)
    expected = {"ToolCall", "ToolSchema", "ChatRequest", "ToolRequest", "Message", "Prompt", "Checkpoint"}
    expected |= {"SearchHit", "FetchResponse", "Chunk", "Observation", "Usage", "Delta", "LLMResult"}
    assert expected <= names


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=IDS)
def test_every_container_field_is_frozen_after_construction(cls: type) -> None:
    assert frozen_field_problems(cls) == []


def test_the_ratchet_catches_a_type_with_a_mutable_payload() -> None:
    @dataclasses.dataclass(frozen=True)
    class Leaky:
        payload: dict[str, Any]
        items: list[int]

    @dataclasses.dataclass
    class Unfrozen:
        name: str

    assert frozen_field_problems(Leaky) == [
        "Leaky.payload holds a mutable dict",
        "Leaky.items holds a mutable list",
    ]
    assert frozen_field_problems(Unfrozen) == ["Unfrozen is not frozen"]


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=IDS)
def test_every_value_type_is_hashable_with_payloads_and_survives_copies(cls: type) -> None:
    instance = build(cls)
    assert hash(instance) == hash(build(cls))
    assert instance == build(cls)
    assert len({instance, build(cls)}) == 1
    assert copy.deepcopy(instance) == instance
    assert pickle.loads(pickle.dumps(instance)) == instance
    if not _has_nested_dataclass(cls):  # asdict turns nested dataclasses into dicts
        assert cls(**dataclasses.asdict(instance)) == instance


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=IDS)
def test_replace_keeps_payloads_frozen_without_refreezing(cls: type) -> None:
    instance = build(cls)
    replaced = dataclasses.replace(instance)
    assert replaced == instance
    for name, hint in hints(cls).items():
        if is_container(hint):
            assert getattr(replaced, name) is getattr(instance, name)


def _has_nested_dataclass(cls: type) -> bool:
    return any(
        dataclasses.is_dataclass(strip_optional(h))
        or any(dataclasses.is_dataclass(a) for a in typing.get_args(strip_optional(h)))
        for h in hints(cls).values()
    )
