"""stable_hash (cross-process content hash) and equality_hash (== -consistent hash)."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import enum
import json
import os
import re
import subprocess
import sys
import uuid
from decimal import Decimal
from typing import Any

import pytest

from core.serialization import FrozenDict, deep_freeze, equality_hash, stable_hash
from tests.kit import PROJECT


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class OtherPoint:
    x: int
    y: int


class Colour(enum.Enum):
    RED = 1


class Shade(enum.StrEnum):
    DARK = "dark"


class Slotted:
    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class OtherSlotted:
    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class Plain:
    def __init__(self, value: Any) -> None:
        self.value = value


def test_the_hash_is_32_lowercase_hex_digits() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", stable_hash({"a": 1}))


def test_dict_key_order_does_not_matter_at_any_depth() -> None:
    first = {"a": 1, "b": {"x": [1, 2], "y": None}}
    second = {"b": {"y": None, "x": [1, 2]}, "a": 1}
    assert stable_hash(first) == stable_hash(second)


def test_frozen_and_plain_containers_hash_alike_and_tuples_hash_like_lists() -> None:
    payload = {"q": "octopus", "filters": {"tags": ["marine"]}}
    assert stable_hash(deep_freeze(payload)) == stable_hash(payload)
    assert stable_hash((1, 2)) == stable_hash([1, 2])


def test_different_values_hash_differently() -> None:
    values = [{"a": 1}, {"a": 2}, {"b": 1}, [1, 2], [2, 1], "x", "", None, [], {}]
    assert len({stable_hash(v) for v in values}) == len(values)


def test_json_types_are_kept_apart_even_where_python_calls_them_equal() -> None:
    assert len({stable_hash(1), stable_hash(1.0), stable_hash(True), stable_hash("1")}) == 4


def test_non_string_keys_hash_the_way_json_writes_them_and_mixed_keys_still_work() -> None:
    assert stable_hash({1: "a"}) == stable_hash({"1": "a"})
    mixed = {1: "a", "b": 2, (3, 4): [5]}
    reordered = {(3, 4): [5], "b": 2, 1: "a"}
    assert stable_hash(mixed) == stable_hash(reordered)
    assert stable_hash(mixed) != stable_hash({1: "a", "b": 2, (3, 5): [5]})


def test_sets_hash_independently_of_iteration_order() -> None:
    assert stable_hash({"b", "a", "c"}) == stable_hash(frozenset(["c", "a", "b"]))
    assert stable_hash({"a"}) != stable_hash(["a"])


def test_dataclasses_hash_on_their_type_and_every_field() -> None:
    assert stable_hash(Point(1, 2)) == stable_hash(Point(1, 2))
    assert stable_hash(Point(1, 2)) != stable_hash(Point(2, 1))
    assert stable_hash(Point(1, 2)) != stable_hash(OtherPoint(1, 2))
    assert stable_hash(Point(1, 2)) != stable_hash({"x": 1, "y": 2})


def test_objects_with_attributes_hash_on_their_type_and_attributes() -> None:
    assert stable_hash(Plain([1])) == stable_hash(Plain([1]))
    assert stable_hash(Plain([1])) != stable_hash(Plain([2]))


def test_typed_stdlib_values_hash_on_their_value() -> None:
    values = [
        b"ab",
        Decimal("1.10"),
        Decimal("1.1"),
        datetime.datetime(2026, 8, 1, 12, 0),
        datetime.date(2026, 8, 1),
        uuid.UUID(int=7),
        Colour.RED,
        1 + 2j,
    ]
    assert len({stable_hash(v) for v in values}) == len(values)
    assert stable_hash(Decimal("1.10")) == stable_hash(Decimal("1.10"))
    assert stable_hash(Shade.DARK) == stable_hash("dark")


def test_the_uninspectable_fallback_hashes_only_the_class_so_same_class_values_collide() -> None:
    assert stable_hash(Slotted(1)) == stable_hash(Slotted(2))
    assert stable_hash(Slotted(1)) != stable_hash(OtherSlotted(1))


def test_a_cyclic_value_raises_value_error() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    with pytest.raises(ValueError):
        stable_hash(cyclic)


SAMPLES = (
    "[{'b': 1, 'a': [1, 2.5, None, True]}, {'x', 'y', 'z', 'w'}, 'ünïcode', "
    "{1: 'a', 'b': (2, 3)}, {'alpha': {'beta', 'gamma', 'delta'}}, -0.0, 1000000000000000000000000000000]"
)


def test_the_hash_is_identical_in_processes_with_different_hash_seeds() -> None:
    here = [stable_hash(v) for v in ast.literal_eval(SAMPLES)]
    script = (
        "import ast, json, sys\n"
        "from core.serialization import stable_hash\n"
        f"print(json.dumps([stable_hash(v) for v in ast.literal_eval({SAMPLES!r})]))\n"
    )
    for seed in ("0", "1", "987654"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        output = subprocess.run(
            [sys.executable, "-c", script], cwd=PROJECT, env=env, capture_output=True, text=True, check=True
        ).stdout
        assert json.loads(output) == here


def test_equality_hash_agrees_with_equality_across_frozen_plain_and_numeric_types() -> None:
    assert equality_hash({"a": [1, {"b": 2}]}) == equality_hash(deep_freeze({"a": [1, {"b": 2}]}))
    assert equality_hash({"a": 1}) == equality_hash({"a": 1.0}) == equality_hash({"a": True})
    assert equality_hash({"a": 1, "b": 2}) == equality_hash({"b": 2, "a": 1})
    assert equality_hash({"s": {1, 2}}) == equality_hash({"s": {2, 1}})
    assert equality_hash({"a": [1, 2]}) != equality_hash({"a": [2, 1]})


def test_equality_hash_tolerates_unhashable_leaves() -> None:
    @dataclasses.dataclass
    class Unhashable:
        v: int

    assert equality_hash(FrozenDict(x=Unhashable(1))) == equality_hash({"x": Unhashable(1)})
