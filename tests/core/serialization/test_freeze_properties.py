"""Property tests: freeze round trips and stable_hash over arbitrary JSON-like values."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core.serialization import FrozenDict, FrozenList, deep_freeze, stable_hash, thaw

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)


def deeply_frozen(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(deeply_frozen(v) for v in value.values())
    if isinstance(value, list):
        return type(value) is FrozenList and all(deeply_frozen(v) for v in value)
    return True


def plain(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is dict and all(plain(v) for v in value.values())
    if isinstance(value, list):
        return type(value) is list and all(plain(v) for v in value)
    return True


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Holder:
    payload: Any


@given(json_values)
def test_freezing_keeps_the_value_and_freezes_every_level(value: Any) -> None:
    frozen = deep_freeze(value)
    assert frozen == value
    assert deeply_frozen(frozen)
    assert deep_freeze(frozen) is frozen or not isinstance(frozen, (dict, list))


@given(json_values)
def test_json_round_trip(value: Any) -> None:
    frozen = deep_freeze(value)
    assert json.dumps(frozen) == json.dumps(value)
    assert json.loads(json.dumps(frozen)) == value


@given(json_values)
def test_pickle_round_trip(value: Any) -> None:
    restored = pickle.loads(pickle.dumps(deep_freeze(value)))
    assert restored == value and deeply_frozen(restored)


@given(json_values)
def test_deepcopy_round_trip(value: Any) -> None:
    copied = copy.deepcopy(deep_freeze(value))
    assert copied == value and deeply_frozen(copied)


@given(json_values)
def test_asdict_round_trip(value: Any) -> None:
    result = dataclasses.asdict(Holder(deep_freeze(value)))
    assert result == {"payload": value} and deeply_frozen(result["payload"])


@given(json_values)
def test_thaw_undoes_the_freeze(value: Any) -> None:
    thawed = thaw(deep_freeze(value))
    assert thawed == value and plain(thawed)


@given(json_values)
def test_stable_hash_is_equal_for_equal_values_however_they_were_built(value: Any) -> None:
    expected = stable_hash(value)
    assert stable_hash(deep_freeze(value)) == expected
    assert stable_hash(copy.deepcopy(value)) == expected
    assert stable_hash(json.loads(json.dumps(value))) == expected
    assert stable_hash(reversed_keys(value)) == expected


@given(json_values, json_values)
def test_stable_hash_separates_different_json_documents(first: Any, second: Any) -> None:
    same_document = json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert (stable_hash(first) == stable_hash(second)) == same_document
