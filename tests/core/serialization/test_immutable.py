"""FrozenDict / FrozenList and the deep, copying freeze."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from collections import OrderedDict
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest

from core.serialization import (
    FrozenDict,
    FrozenList,
    deep_freeze,
    freeze_mapping,
    freeze_sequence,
    thaw,
)

PAYLOAD = {"q": "octopus", "filters": {"tags": ["marine"], "depth": [1, {"m": 2}]}, "n": None}


def is_deeply_frozen(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(is_deeply_frozen(v) for v in value.values())
    if isinstance(value, list):
        return type(value) is FrozenList and all(is_deeply_frozen(v) for v in value)
    if isinstance(value, tuple):
        return all(is_deeply_frozen(v) for v in value)
    return not isinstance(value, (set, bytearray))


DICT_MUTATIONS: dict[str, Callable[[Any], object]] = {
    "setitem": lambda d: d.__setitem__("q", "squid"),
    "setitem new key": lambda d: d.__setitem__("new", 1),
    "delitem": lambda d: d.__delitem__("q"),
    "update": lambda d: d.update({"q": "squid"}),
    "update kwargs": lambda d: d.update(q="squid"),
    "pop": lambda d: d.pop("q"),
    "pop default": lambda d: d.pop("missing", None),
    "popitem": lambda d: d.popitem(),
    "clear": lambda d: d.clear(),
    "setdefault": lambda d: d.setdefault("new", 1),
    "setdefault existing": lambda d: d.setdefault("q"),
}

LIST_MUTATIONS: dict[str, Callable[[Any], object]] = {
    "setitem": lambda v: v.__setitem__(0, 9),
    "slice assignment": lambda v: v.__setitem__(slice(0, 1), [9, 9]),
    "delitem": lambda v: v.__delitem__(0),
    "slice deletion": lambda v: v.__delitem__(slice(0, 2)),
    "append": lambda v: v.append(9),
    "extend": lambda v: v.extend([9]),
    "insert": lambda v: v.insert(0, 9),
    "remove": lambda v: v.remove(1),
    "pop": lambda v: v.pop(),
    "pop index": lambda v: v.pop(0),
    "clear": lambda v: v.clear(),
    "sort": lambda v: v.sort(),
    "sort key": lambda v: v.sort(key=lambda x: -x),
    "reverse": lambda v: v.reverse(),
}


@pytest.mark.parametrize("mutate", DICT_MUTATIONS.values(), ids=DICT_MUTATIONS.keys())
def test_frozen_dict_refuses_every_mutating_method(mutate: Callable[[Any], object]) -> None:
    frozen = deep_freeze(PAYLOAD)
    with pytest.raises(TypeError, match="FrozenDict does not support"):
        mutate(frozen)
    assert frozen == PAYLOAD


@pytest.mark.parametrize("mutate", LIST_MUTATIONS.values(), ids=LIST_MUTATIONS.keys())
def test_frozen_list_refuses_every_mutating_method(mutate: Callable[[Any], object]) -> None:
    frozen = deep_freeze([1, 2, 3])
    with pytest.raises(TypeError, match="FrozenList does not support"):
        mutate(frozen)
    assert frozen == [1, 2, 3]


def test_statement_forms_are_refused_too() -> None:
    d = deep_freeze({"a": 1})
    v = deep_freeze([1, 2, 3])
    alias_d, alias_v = d, v
    with pytest.raises(TypeError, match=r"\|="):
        d |= {"b": 2}
    with pytest.raises(TypeError, match=r"\+="):
        v += [4]
    with pytest.raises(TypeError, match=r"\*="):
        v *= 2
    with pytest.raises(TypeError):
        del d["a"]
    with pytest.raises(TypeError):
        del v[0]
    with pytest.raises(TypeError):
        del v[:]
    with pytest.raises(TypeError):
        v[1:] = []
    assert d is alias_d and v is alias_v
    assert d == {"a": 1} and v == [1, 2, 3]


def test_refusal_message_names_the_type_and_operation_and_hints_at_a_copy() -> None:
    with pytest.raises(TypeError) as caught:
        deep_freeze({"a": 1})["a"] = 2
    assert str(caught.value) == "FrozenDict does not support item assignment"
    assert any("dict(x)" in note for note in caught.value.__notes__)


def test_the_freeze_is_deep_and_keeps_the_payload_equal() -> None:
    frozen = deep_freeze(PAYLOAD)
    assert frozen == PAYLOAD
    assert is_deeply_frozen(frozen)
    with pytest.raises(TypeError):
        frozen["filters"]["depth"][1]["m"] = 3


def test_the_freeze_copies_so_the_callers_container_cannot_reach_it() -> None:
    source: dict[str, Any] = {"tags": ["marine"], "inner": {"a": 1}}
    frozen = deep_freeze(source)
    source["tags"].append("deep")
    source["inner"]["a"] = 2
    source["new"] = True
    assert frozen == {"tags": ["marine"], "inner": {"a": 1}}


def test_frozen_containers_are_real_dicts_and_lists_to_every_consumer() -> None:
    frozen = deep_freeze(PAYLOAD)
    assert isinstance(frozen, dict) and isinstance(frozen["filters"]["tags"], list)
    assert json.dumps(frozen) == json.dumps(PAYLOAD)
    assert json.dumps(frozen, sort_keys=True, indent=2) == json.dumps(PAYLOAD, sort_keys=True, indent=2)
    assert repr(frozen) == repr(PAYLOAD)
    assert PAYLOAD == frozen and frozen == PAYLOAD and not (frozen != PAYLOAD)
    assert deep_freeze([1, [2]]) == [1, [2]]


def test_already_frozen_values_are_returned_as_they_are() -> None:
    frozen = deep_freeze(PAYLOAD)
    assert deep_freeze(frozen) is frozen
    assert freeze_mapping(frozen) is frozen
    frozen_list = deep_freeze([1, [2]])
    assert deep_freeze(frozen_list) is frozen_list
    assert freeze_sequence(frozen_list) is frozen_list


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trips_and_stays_deeply_frozen(protocol: int) -> None:
    frozen = deep_freeze(PAYLOAD)
    restored = pickle.loads(pickle.dumps(frozen, protocol=protocol))
    assert restored == PAYLOAD
    assert is_deeply_frozen(restored)
    restored_list = pickle.loads(pickle.dumps(deep_freeze([1, [2]]), protocol=protocol))
    assert restored_list == [1, [2]] and is_deeply_frozen(restored_list)


def test_deepcopy_copies_and_stays_frozen_and_copy_returns_the_same_object() -> None:
    leaf = {"mutable": "leaf object"}

    @dataclasses.dataclass
    class Box:
        content: dict[str, str]

    frozen = deep_freeze({"payload": [1, {"x": 2}], "box": Box(leaf)})
    copied = copy.deepcopy(frozen)
    assert copied == frozen and copied is not frozen
    assert is_deeply_frozen(copied["payload"]) and type(copied) is FrozenDict
    assert copied["box"] is not frozen["box"]  # leaves are deep-copied like any deepcopy
    assert copy.copy(frozen) is frozen
    frozen_list = deep_freeze([1, [2]])
    assert copy.copy(frozen_list) is frozen_list
    assert type(copy.deepcopy(frozen_list)[1]) is FrozenList


def test_dataclasses_asdict_rebuilds_frozen_containers() -> None:
    @dataclasses.dataclass(frozen=True)
    class Holder:
        payload: Any

    result = dataclasses.asdict(Holder(deep_freeze(PAYLOAD)))
    assert result == {"payload": PAYLOAD}
    assert is_deeply_frozen(result["payload"])


def test_constructors_accept_every_dict_and_list_form_and_freeze_deeply() -> None:
    assert FrozenDict({"a": [1]}) == {"a": [1]}
    assert type(FrozenDict({"a": [1]})["a"]) is FrozenList
    assert FrozenDict([("a", {"b": 1})], c=2) == {"a": {"b": 1}, "c": 2}
    assert type(FrozenDict(a={"b": 1})["a"]) is FrozenDict
    assert FrozenDict(("k", v) for v in range(1)) == {"k": 0}
    assert FrozenList(x for x in ([1], {"a": 2})) == [[1], {"a": 2}]
    assert all(type(item) in (FrozenList, FrozenDict) for item in FrozenList([[1], {"a": 2}]))
    assert FrozenDict() == {} and FrozenList() == []
    from_keys = FrozenDict.fromkeys(["a", "b"], [1])
    assert from_keys == {"a": [1], "b": [1]} and type(from_keys) is FrozenDict
    assert type(from_keys["a"]) is FrozenList


def test_re_running_init_does_not_refill_a_frozen_container() -> None:
    frozen_dict: FrozenDict[str, int] = FrozenDict({"a": 1})
    frozen_dict.__init__({"b": 2})  # type: ignore[misc]
    frozen_list = FrozenList([1])
    frozen_list.__init__([2, 3])  # type: ignore[misc]
    assert frozen_dict == {"a": 1} and frozen_list == [1]


def test_frozen_containers_stay_unhashable_like_dict_and_list() -> None:
    with pytest.raises(TypeError):
        hash(FrozenDict())
    with pytest.raises(TypeError):
        hash(FrozenList())


def test_non_mutating_operations_return_plain_shallow_copies() -> None:
    frozen = deep_freeze({"a": [1]})
    editable = frozen.copy()
    editable["b"] = 2
    assert type(editable) is dict and type(frozen | {"c": 3}) is dict
    assert type(editable["a"]) is FrozenList  # shallow: nested containers stay frozen
    frozen_list = deep_freeze([1, 2])
    assert type(frozen_list[:]) is list and type(frozen_list + [3]) is list and type(frozen_list * 2) is list
    assert frozen == {"a": [1]} and frozen_list == [1, 2]


def test_thaw_returns_a_deep_fully_editable_copy() -> None:
    frozen = deep_freeze({"a": [1, {"b": (2, [3])}]})
    thawed = thaw(frozen)
    assert thawed == frozen
    assert type(thawed) is dict and type(thawed["a"]) is list and type(thawed["a"][1]) is dict
    assert type(thawed["a"][1]["b"][1]) is list
    thawed["a"][1]["b"][1].append(4)
    assert frozen == {"a": [1, {"b": (2, [3])}]}


def test_tuples_sets_bytearrays_and_other_mappings_follow_the_documented_policy() -> None:
    source_tuple = (1, [2], {"a": [3]})
    frozen_tuple = deep_freeze(source_tuple)
    assert type(frozen_tuple) is tuple and frozen_tuple == source_tuple
    assert type(frozen_tuple[1]) is FrozenList and type(frozen_tuple[2]["a"]) is FrozenList
    scalars = (1, "a", None)
    assert deep_freeze(scalars) is scalars
    assert deep_freeze({1, 2}) == frozenset({1, 2}) and type(deep_freeze({1, 2})) is frozenset
    assert deep_freeze(bytearray(b"xy")) == b"xy" and type(deep_freeze(bytearray(b"xy"))) is bytes
    ordered = deep_freeze(OrderedDict(a=[1]))
    assert type(ordered) is FrozenDict and type(ordered["a"]) is FrozenList
    assert type(deep_freeze(MappingProxyType({"a": 1}))) is FrozenDict


def test_objects_the_framework_does_not_own_are_leaves() -> None:
    @dataclasses.dataclass
    class Mutable:
        items: list[int]

    leaf = Mutable([1])
    frozen = deep_freeze({"leaf": leaf})
    assert frozen["leaf"] is leaf and type(leaf.items) is list


def test_field_freezers_refuse_the_wrong_kind_of_container() -> None:
    with pytest.raises(TypeError, match="expected a mapping"):
        freeze_mapping([("a", 1)])  # type: ignore[arg-type]
    for wrong in ("abc", {"a": 1}, 3):
        with pytest.raises(TypeError, match="expected a sequence"):
            freeze_sequence(wrong)  # type: ignore[arg-type]
    assert freeze_sequence(({"a": 1},)) == [{"a": 1}]
    assert type(freeze_sequence(({"a": 1},))[0]) is FrozenDict
