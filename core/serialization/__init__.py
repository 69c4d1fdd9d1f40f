"""Deep, copying freeze for payloads that cross a boundary, and content hashes.

``FrozenDict`` / ``FrozenList`` are ``dict`` / ``list`` subclasses that refuse mutation;
``deep_freeze`` builds them from JSON-like values, ``thaw`` turns them back into editable
plain containers. ``stable_hash`` is a process-independent content hash for cache and
idempotency keys; ``equality_hash`` is an ``==``-consistent hash for ``__hash__`` methods.

This package imports only the standard library and nothing else from ``core``.
"""

from core.serialization._hashing import equality_hash, stable_hash
from core.serialization._immutable import (
    FrozenDict,
    FrozenList,
    deep_freeze,
    freeze_mapping,
    freeze_sequence,
    thaw,
)

__all__ = [
    "FrozenDict",
    "FrozenList",
    "deep_freeze",
    "equality_hash",
    "freeze_mapping",
    "freeze_sequence",
    "stable_hash",
    "thaw",
]
