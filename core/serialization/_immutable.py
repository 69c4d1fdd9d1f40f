"""Deeply immutable JSON-like containers and the copying freeze that builds them.

A frozen dataclass only freezes its field *references*; a ``dict`` held in a field can still be
rewritten in place. Payloads that cross a boundary (tool arguments, schemas, transcripts, durable
state) are therefore stored as :class:`FrozenDict` / :class:`FrozenList`: real ``dict`` / ``list``
subclasses that refuse every mutating operation with ``TypeError``. Being real subclasses is the
point: ``json.dumps``, ``isinstance(x, dict)``, ``dataclasses.asdict``, ``copy.deepcopy``,
``pickle`` and equality with plain containers all keep working, which a ``MappingProxyType`` view
does not offer.

Choices made here (each is tested):

* Every ``FrozenDict`` / ``FrozenList`` is *deeply* frozen: the public constructors freeze what
  they are given, so ``FrozenDict({"a": [1]})["a"]`` is a ``FrozenList``. ``deep_freeze``
  relies on that invariant to return an already-frozen container as is (one type check).
* The freeze *copies*: the caller's dict or list is never reused, so editing it afterwards
  cannot reach the stored payload.
* Tuples stay tuples with their items frozen (they are already immutable); ``set`` becomes
  ``frozenset``; ``bytearray`` becomes ``bytes``; other ``dict`` / ``list`` subclasses and
  ``MappingProxyType`` become ``FrozenDict`` / ``FrozenList``. Anything else (dataclasses,
  named tuples, arbitrary objects) is a leaf and passes through untouched: rewriting an object
  the framework does not own is out of bounds, and value types freeze their own fields.
* Both containers stay unhashable, like ``dict`` and ``list``: a container equal to a plain
  dict must not promise a hash the plain dict refuses, and hashing would be O(payload). Value
  types that hold them hash on an identity subset instead.
* ``repr`` is the plain ``dict`` / ``list`` repr, so printing a payload looks the same frozen
  or not.
* ``copy.copy`` returns the same object (it is immutable); ``.copy()``, slicing, ``|`` and
  ``+`` return *plain* shallow copies (the nested containers stay frozen); ``thaw`` returns a
  deep, fully editable copy.
* Payloads must be acyclic, as JSON is; a self-containing payload raises ``RecursionError``.
* Calling ``dict.__setitem__(frozen, ...)`` directly on the base class bypasses the refusal;
  that is deliberate sabotage and is not defended against.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from types import MappingProxyType, NoneType
from typing import Any, NoReturn, SupportsIndex, TypeVar, overload

_K = TypeVar("_K")
_V = TypeVar("_V")
_T = TypeVar("_T")

_EDIT_HINT = "frozen payloads are deeply immutable; edit a copy made with dict(x), list(x) or thaw(x)"


def _refuse(owner: object, what: str) -> NoReturn:
    error = TypeError(f"{type(owner).__name__} does not support {what}")
    error.add_note(_EDIT_HINT)
    raise error


class FrozenDict(dict[_K, _V]):
    """A ``dict`` that refuses mutation, deeply; equal to and serialisable like a plain dict."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict[_K, _V]:
        self = _new_dict(cls)
        _dict_update(self, *args, **kwargs)
        for key, value in list(_dict_items(self)):
            if type(value) not in _ATOMIC:
                _dict_setitem(self, key, deep_freeze(value))
        return self

    # The overloads give type checkers dict's constructor signatures.
    @overload
    def __init__(self) -> None: ...
    @overload
    def __init__(self: FrozenDict[str, _V], **kwargs: _V) -> None: ...
    @overload
    def __init__(self, mapping: Mapping[_K, _V], /) -> None: ...
    @overload
    def __init__(self: FrozenDict[str, _V], mapping: Mapping[str, _V], /, **kwargs: _V) -> None: ...
    @overload
    def __init__(self, iterable: Iterable[tuple[_K, _V]], /) -> None: ...
    @overload
    def __init__(self: FrozenDict[str, _V], iterable: Iterable[tuple[str, _V]], /, **kwargs: _V) -> None: ...
    def __init__(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[misc]
        # Population happens once, in __new__; re-running __init__ must not refill the dict.
        pass

    def __setitem__(self, key: _K, value: _V) -> NoReturn:
        _refuse(self, "item assignment")

    def __delitem__(self, key: _K) -> NoReturn:
        _refuse(self, "item deletion")

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refuse(self, "|=")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "update()")

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "pop()")

    def popitem(self) -> NoReturn:
        _refuse(self, "popitem()")

    def clear(self) -> NoReturn:
        _refuse(self, "clear()")

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "setdefault()")

    @classmethod
    def fromkeys(cls, iterable: Iterable[Any], value: Any = None, /) -> FrozenDict[Any, Any]:
        # dict.fromkeys fills a subclass through __setitem__, which refuses; build it whole instead.
        return cls((key, value) for key in iterable)

    def __reduce__(self) -> tuple[Any, ...]:
        # The default dict-subclass pickling restores items through __setitem__, which refuses;
        # rebuild through the constructor from a plain copy instead.
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict[_K, _V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict[_K, _V]:
        deepcopy = copy.deepcopy
        result: FrozenDict[_K, _V] = _new_dict(FrozenDict)
        _dict_update(result, {deepcopy(k, memo): deepcopy(v, memo) for k, v in _dict_items(self)})
        return result


class FrozenList(list[_T]):
    """A ``list`` that refuses mutation, deeply; equal to and serialisable like a plain list."""

    __slots__ = ()

    def __new__(cls, iterable: Iterable[_T] = (), /) -> FrozenList[_T]:
        self = _new_list(cls)
        _list_extend(self, iterable)
        for index, item in enumerate(self):
            if type(item) not in _ATOMIC:
                _list_setitem(self, index, deep_freeze(item))
        return self

    def __init__(self, iterable: Iterable[_T] = (), /) -> None:
        # Population happens once, in __new__; re-running __init__ must not refill the list.
        pass

    def __setitem__(self, index: SupportsIndex | slice, value: Any) -> NoReturn:
        _refuse(self, "item assignment")

    def __delitem__(self, index: SupportsIndex | slice) -> NoReturn:
        _refuse(self, "item deletion")

    def __iadd__(self, other: Iterable[_T]) -> NoReturn:  # type: ignore[misc,override]
        _refuse(self, "+=")

    def __imul__(self, count: SupportsIndex) -> NoReturn:
        _refuse(self, "*=")

    def append(self, item: _T) -> NoReturn:
        _refuse(self, "append()")

    def extend(self, items: Iterable[_T]) -> NoReturn:
        _refuse(self, "extend()")

    def insert(self, index: SupportsIndex, item: _T) -> NoReturn:
        _refuse(self, "insert()")

    def remove(self, item: _T) -> NoReturn:
        _refuse(self, "remove()")

    def pop(self, index: SupportsIndex = -1) -> NoReturn:
        _refuse(self, "pop()")

    def clear(self) -> NoReturn:
        _refuse(self, "clear()")

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self, "sort()")

    def reverse(self) -> NoReturn:
        _refuse(self, "reverse()")

    def __reduce__(self) -> tuple[Any, ...]:
        # The default list-subclass pickling restores items through extend/append, which refuse.
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList[_T]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList[_T]:
        deepcopy = copy.deepcopy
        result: FrozenList[_T] = _new_list(FrozenList)
        _list_extend(result, [deepcopy(item, memo) for item in self])
        return result


# Unbound base-class operations: the freeze fills new containers through these, never through
# the refusing overrides, and without running the Python-level __new__/__init__.
_new_dict = dict.__new__
_dict_update = dict.update
_dict_setitem = dict.__setitem__
_dict_items = dict.items
_new_list = list.__new__
_list_extend = list.extend
_list_setitem = list.__setitem__

# Values returned by deep_freeze unchanged without further inspection: immutable scalars and
# containers that are frozen by construction.
_ATOMIC: frozenset[type] = frozenset(
    {str, int, float, bool, NoneType, bytes, complex, frozenset, FrozenDict, FrozenList}
)


# Both builders copy the source in one C-level call, then replace only the values that are not
# atomic: JSON payloads are mostly scalars, so most items cost one type check and no allocation.


def _freeze_dict(value: Mapping[Any, Any]) -> FrozenDict[Any, Any]:
    result: FrozenDict[Any, Any] = _new_dict(FrozenDict)
    _dict_update(result, value)
    atomic = _ATOMIC
    for key, item in value.items():
        kind = type(item)
        if kind in atomic:
            continue
        if kind is dict:
            _dict_setitem(result, key, _freeze_dict(item))
        elif kind is list:
            _dict_setitem(result, key, _freeze_list(item))
        else:
            _dict_setitem(result, key, deep_freeze(item))
    return result


def _freeze_list(value: Iterable[Any]) -> FrozenList[Any]:
    result: FrozenList[Any] = _new_list(FrozenList)
    _list_extend(result, value)
    atomic = _ATOMIC
    for index, item in enumerate(result):
        kind = type(item)
        if kind in atomic:
            continue
        if kind is dict:
            _list_setitem(result, index, _freeze_dict(item))
        elif kind is list:
            _list_setitem(result, index, _freeze_list(item))
        else:
            _list_setitem(result, index, deep_freeze(item))
    return result


def _freeze_tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    atomic = _ATOMIC
    for item in value:
        if type(item) not in atomic:
            return tuple([deep_freeze(item) for item in value])
    return value


def _freeze_uncommon(value: Any) -> Any:
    if isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, (dict, MappingProxyType)):
        return _freeze_dict(value)
    if isinstance(value, list):
        return _freeze_list(value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if type(value) is bytearray:
        return bytes(value)
    return value


def deep_freeze(value: Any) -> Any:
    """Return an immutable deep copy of a JSON-like ``value`` (see the module notes).

    Already-frozen containers and immutable scalars are returned as they are.
    """
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict:
        return _freeze_dict(value)
    if kind is list:
        return _freeze_list(value)
    if kind is tuple:
        return _freeze_tuple(value)
    return _freeze_uncommon(value)


def freeze_mapping(value: Mapping[_K, _V]) -> FrozenDict[_K, _V]:
    """Freeze a mapping field: always a :class:`FrozenDict`, whatever mapping came in."""
    if type(value) is FrozenDict:
        return value
    if type(value) is dict or isinstance(value, Mapping):
        return _freeze_dict(value)
    raise TypeError(f"expected a mapping, got {type(value).__name__}")


def freeze_sequence(value: Iterable[_T]) -> FrozenList[_T]:
    """Freeze a sequence field: always a :class:`FrozenList`, from a list, tuple or iterable.

    A string or a mapping is refused: both iterate, and both are almost always a mistake here.
    """
    if type(value) is FrozenList:
        return value
    if type(value) is list or type(value) is tuple:
        return _freeze_list(value)
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"expected a sequence, got {type(value).__name__}")
    return _freeze_list(value)


def thaw(value: Any) -> Any:
    """Return a deep, fully editable copy: frozen (and plain) dicts and lists become plain ones.

    Tuples keep their type with thawed items; leaves are returned as they are.
    """
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    if type(value) is tuple:
        return tuple(thaw(item) for item in value)
    return value
