"""Content hashes: ``stable_hash`` for keys that must agree across processes, and
``equality_hash`` for ``__hash__`` methods that must agree with ``==``.

``stable_hash(value)`` is a 32-hex-digit (128-bit BLAKE2b) digest of a canonical JSON encoding.
It never touches Python's salted ``hash()``, so it is identical across processes whatever
``PYTHONHASHSEED`` says. The encoding:

* JSON-like values are encoded as JSON with sorted keys, so dict key order never matters and a
  frozen container hashes like the plain one it equals. Tuples encode as arrays (like ``json``).
* It hashes the JSON *document*, not Python equality: ``1``, ``1.0``, ``True`` and ``"1"`` hash
  differently, and so do ``0.0`` and ``-0.0``, although Python calls some of them equal.
* Dict keys are written the way ``json`` writes them (``{1: "a"}`` and ``{"1": "a"}`` are the
  same document). A dict whose keys ``json`` cannot sort or write (mixed key types, tuples) is
  encoded as a sorted list of typed key/value pairs instead.
* Sets encode as a sorted array of their encoded members. ``str`` / ``int`` / ``float``
  subclasses (including ``StrEnum`` / ``IntEnum`` members) encode as the plain value, as ``json``
  does; other enum members encode as their qualified class name and value.
* Dataclass instances encode as their qualified class name plus every field; other objects with
  a ``__dict__`` as their qualified class name plus their attributes (sorted). ``bytes``,
  ``Decimal``, ``UUID``, ``datetime`` / ``date`` / ``time`` and paths have a typed encoding.
* Fallback, for anything else it cannot introspect (for example a ``__slots__`` object that is
  not a dataclass): only the qualified class name is hashed. Two such values of one class
  therefore collide. That is the lossy, documented end of the encoding; callers that compare
  values must confirm a hash match with ``==``.
* A cyclic value raises ``ValueError``.

``equality_hash(value)`` is an ordinary (per-process) ``int`` hash that is consistent with
``==`` for JSON-like payloads: equal values — including a ``FrozenDict`` and a plain ``dict``, or
``1`` and ``1.0`` — always hash equally, unhashable leaves contribute a constant, and it works
whether or not the payload contains lists or dicts. Use it in ``__hash__``; use ``stable_hash``
for cache and idempotency keys.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import json
import uuid
from decimal import Decimal
from pathlib import PurePath
from typing import Any

# A marker no JSON document written by a user is expected to start an array with; it keeps
# typed encodings (dataclasses, sets, bytes, ...) apart from plain lists that happen to look alike.
_TAG = "\x00keel:"

_encoder = json.JSONEncoder(
    skipkeys=False,
    ensure_ascii=False,
    check_circular=True,
    allow_nan=True,
    sort_keys=True,
    separators=(",", ":"),
    default=lambda value: _typed(value),
)


def _qualname(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _encode(value: Any) -> str:
    try:
        return _encoder.encode(value)
    except TypeError:
        # Dict keys the encoder cannot sort or emit (mixed types, tuples, ...): rewrite the
        # value so that every such dict becomes a sorted list of typed pairs, then encode again.
        return _encoder.encode(_canonical(value))


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {key: _canonical(item) for key, item in value.items()}
        pairs = sorted((_encode(_canonical(key)), _canonical(item)) for key, item in value.items())
        return [_TAG + "dict", [[key, item] for key, item in pairs]]
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def _typed(value: Any) -> Any:
    """The JSON stand-in for a value the encoder does not handle natively."""
    if isinstance(value, (set, frozenset)):
        return [_TAG + "set", sorted(_encode(item) for item in value)]
    if isinstance(value, enum.Enum):
        return [_TAG + "enum", _qualname(type(value)), value.value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return [_TAG + "dataclass", _qualname(type(value)), _canonical(fields)]
    if isinstance(value, (bytes, bytearray)):
        return [_TAG + "bytes", bytes(value).hex()]
    if isinstance(value, Decimal):
        return [_TAG + "decimal", str(value)]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return [_TAG + _qualname(type(value)), value.isoformat()]
    if isinstance(value, (uuid.UUID, PurePath)):
        return [_TAG + _qualname(type(value)), str(value)]
    if isinstance(value, complex):
        return [_TAG + "complex", repr(value.real), repr(value.imag)]
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return [_TAG + "object", _qualname(type(value)), _canonical(attributes)]
    return [_TAG + "opaque", _qualname(type(value))]


def stable_hash(value: Any) -> str:
    """A 32-hex-digit content hash, deterministic across processes (see the module notes)."""
    text = _encode(value)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


_UNHASHABLE_LEAF = 0x5EED


def equality_hash(value: Any) -> int:
    """A per-process hash consistent with ``==`` for JSON-like payloads (see the module notes)."""
    if isinstance(value, dict):
        return hash(frozenset((key, equality_hash(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return hash(tuple(equality_hash(item) for item in value))
    try:
        return hash(value)
    except TypeError:
        return _UNHASHABLE_LEAF
