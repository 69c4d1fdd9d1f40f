"""``InMemoryVector``: an in-process ``VectorPort`` for a single machine and for tests.

There is no embedding model in ``core``, so similarity is lexical: the cosine of the two texts'
word-count vectors (lower-cased ``\\w+`` tokens). Identical wording scores 1.0, no shared word 0.0.
That is enough to exercise the port (ranking, thresholds, scope and metadata filters) with no model
and no network; an adapter under ``tools/`` brings real embeddings.

Chunks are partitioned by scope (``None`` is the zero tenant); upserting a chunk whose ``id`` is
already stored in that scope replaces it. ``where`` keeps chunks whose metadata has every given key
with an equal value. Results are ordered by score, highest first, ties in insertion order; chunks
that share no word with the query are not returned.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from core.contracts.ports import Chunk, VectorHit
from core.contracts.types import Scope

__all__ = ["InMemoryVector", "lexical_similarity"]

_WORD = re.compile(r"\w+")
_ZERO = Scope()


def _bag(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(count * b[word] for word, count in a.items() if word in b)
    if dot == 0:
        return 0.0
    norm = math.sqrt(sum(c * c for c in a.values())) * math.sqrt(sum(c * c for c in b.values()))
    return min(1.0, dot / norm)


def lexical_similarity(a: str, b: str) -> float:
    """The score ``InMemoryVector`` gives text ``b`` for query ``a`` (cosine of word counts)."""
    return _cosine(_bag(a), _bag(b))


class InMemoryVector:
    """A ``VectorPort`` over word-count vectors, held in memory."""

    def __init__(self) -> None:
        self._chunks: dict[str, dict[str, tuple[Chunk, Counter[str]]]] = {}

    async def upsert(self, chunks: Sequence[Chunk], *, scope: Scope | None = None) -> None:
        partition = self._chunks.setdefault((scope or _ZERO).key(), {})
        for chunk in chunks:
            partition.pop(chunk.id, None)  # a replaced chunk moves to the end of the order
            partition[chunk.id] = (chunk, _bag(chunk.text))

    async def search(
        self,
        query: str,
        k: int = 5,
        *,
        scope: Scope | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[VectorHit]:
        if k <= 0:
            return []
        wanted = _bag(query)
        hits: list[VectorHit] = []
        for chunk, bag in self._chunks.get((scope or _ZERO).key(), {}).values():
            if where and any(chunk.metadata.get(key, _MISSING) != value for key, value in where.items()):
                continue
            score = _cosine(wanted, bag)
            if score > 0.0:
                hits.append(VectorHit(chunk, score))
        hits.sort(key=lambda hit: -hit.score)  # stable: ties keep insertion order
        return hits[:k]

    async def delete(self, ids: Sequence[str], *, scope: Scope | None = None) -> None:
        """Drop the chunks with these ids from ``scope`` (unknown ids are ignored)."""
        partition = self._chunks.get((scope or _ZERO).key(), {})
        for chunk_id in ids:
            partition.pop(chunk_id, None)


_MISSING = object()
