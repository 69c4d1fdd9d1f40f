"""Event payloads are JSON values, checked and frozen once at ``publish``.

A payload is accepted exactly when ``json.loads(json.dumps(payload))`` would give it back: dicts
with ``str`` keys, lists, strings, integers, finite floats, booleans and ``None``. Anything the
round trip would change or refuse is rejected with the path to the offending value — a tuple
(it would come back as a list), a non-string key (it would come back as a string), NaN or
infinity (not JSON), a set, bytes, a datetime, an arbitrary object. Subclasses of ``str``,
``int`` and ``float`` (a ``StrEnum`` member, say) are accepted and delivered as the plain value
JSON would carry, so an in-process subscriber sees exactly what a remote one would.

The accepted payload is deep-frozen (:mod:`core.serialization`): every subscriber of an event
shares one immutable copy, and neither the publisher (editing its dict afterwards) nor another
subscriber can change what a subscriber sees. :func:`thaw` gives an editable copy.

The check is one walk over the value, which for the small payloads events carry is cheaper than
serialising it; :func:`to_json` renders the same value as text for backends that need bytes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from core.serialization import FrozenDict, FrozenList, thaw

from .errors import EventPayloadError

__all__ = ["freeze_json", "thaw", "to_json"]

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


class _Refused(Exception):
    """Raised from deep inside the walk; carries the path back up to build the message."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.path: list[str] = []


def freeze_json(value: Any, *, what: str = "payload") -> Any:
    """The frozen JSON copy of ``value``, or ``EventPayloadError`` saying where it is not JSON."""
    if type(value) is dict:
        # The common event payload, checked here rather than one call down: string keys, plain
        # scalar values. Copied in one C call; every value is immutable already, so the copy is
        # deeply frozen as it stands. Anything else takes the full walk below.
        for key, item in value.items():
            if type(key) is not str:
                break
            of = type(item)
            if not (of is str or of is int or of is bool or item is None or (of is float and _finite(item))):
                break
        else:
            flat = _new_dict(FrozenDict)
            _dict_update(flat, value)
            return flat
    try:
        return _freeze(value)
    except _Refused as refused:
        where = what + "".join(reversed(refused.path))
        raise EventPayloadError(f"{where} {refused.reason}") from None
    except RecursionError:
        raise EventPayloadError(f"{what} is nested too deeply (or contains itself)") from None


def to_json(value: Any) -> str:
    """Compact JSON text of an accepted payload."""
    return _ENCODER.encode(value)


def _freeze(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise _Refused(f"is {value!r}, which JSON cannot carry")
    if kind is dict or kind is FrozenDict:
        for key, item in value.items():
            if type(key) is not str:
                break
            of = type(item)
            if not (of is str or of is int or of is bool or item is None or (of is float and _finite(item))):
                break
        else:
            # The common event payload: string keys, plain scalar values. Copy it in one C call;
            # every value is already immutable, so the copy is deeply frozen as it stands.
            flat = _new_dict(FrozenDict)
            _dict_update(flat, value)
            return flat
        frozen: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                if isinstance(key, str):
                    key = str.__str__(key)
                else:
                    raise _Refused(f"has the key {key!r} ({type(key).__name__}); JSON keys are strings")
            try:
                frozen[key] = _freeze(item)
            except _Refused as refused:
                refused.path.append(f"[{key!r}]")
                raise
        return FrozenDict(frozen)
    if kind is list or kind is FrozenList:
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_freeze(item))
            except _Refused as refused:
                refused.path.append(f"[{index}]")
                raise
        return FrozenList(items)
    return _freeze_uncommon(value)


_finite = math.isfinite
_new_dict = dict.__new__
_dict_update = dict.update


def _freeze_uncommon(value: Any) -> Any:
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return _freeze(float.__float__(value))
    if isinstance(value, tuple):
        raise _Refused("is a tuple; use a list (JSON would turn it into one)")
    raise _Refused(f"is a {type(value).__name__}, which is not a JSON value")
