"""InMemoryVector: lexical similarity, scopes, metadata filters, replacement on upsert."""

from __future__ import annotations

import pytest

from core.contracts.ports import Chunk, VectorPort
from core.contracts.types import Scope
from core.state.stores import InMemoryVector
from core.state.vector import lexical_similarity


def test_satisfies_the_port() -> None:
    assert isinstance(InMemoryVector(), VectorPort)


def test_lexical_similarity() -> None:
    assert lexical_similarity("Rotate the cert", "rotate the CERT") == pytest.approx(1.0)
    assert lexical_similarity("rotate the cert", "bake a cake") == 0.0
    assert 0 < lexical_similarity("rotate the cert", "rotate the key") < 1
    assert lexical_similarity("", "anything") == 0.0


async def test_search_ranks_by_similarity_and_drops_non_matches() -> None:
    index = InMemoryVector()
    await index.upsert(
        [
            Chunk("a", "how to rotate a tls cert"),
            Chunk("b", "rotate cert"),
            Chunk("c", "bake a chocolate cake"),
        ]
    )
    hits = await index.search("rotate cert", k=5)
    assert [hit.chunk.id for hit in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(1.0) and hits[0].score > hits[1].score
    assert len(await index.search("rotate cert", k=1)) == 1
    assert await index.search("rotate cert", k=0) == []


async def test_scopes_and_filters() -> None:
    index = InMemoryVector()
    await index.upsert([Chunk("a", "rotate cert", {"kind": "runbook"})], scope=Scope(1, 1))
    await index.upsert([Chunk("b", "rotate cert", {"kind": "chat"})], scope=Scope(1, 1))
    assert await index.search("rotate cert", scope=Scope(2, 2)) == []
    hits = await index.search("rotate cert", scope=Scope(1, 1), where={"kind": "runbook"})
    assert [hit.chunk.id for hit in hits] == ["a"]
    assert await index.search("rotate cert", scope=Scope(1, 1), where={"missing": 1}) == []


async def test_upsert_replaces_by_id_and_delete_removes() -> None:
    index = InMemoryVector()
    await index.upsert([Chunk("a", "old words")])
    await index.upsert([Chunk("a", "new words")])
    hits = await index.search("words")
    assert [hit.chunk.text for hit in hits] == ["new words"]
    await index.delete(["a", "unknown"])
    assert await index.search("words") == []
