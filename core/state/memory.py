"""What an agent can recall: ``MemoryItem`` and the ``MemorySource`` protocol that returns them.

A memory source (a vector index, a journal, a wrapped search tool) answers ``query`` with
``MemoryItem`` s of one uniform shape, whatever it stores natively, so the code that grounds a prompt
never sees backend details. ``source`` names the backend that produced an item, so a prompt can cite
it; ``score`` is that backend's relevance signal (``None`` when it does not rank). ``metadata`` is
frozen deeply at construction: to annotate an item, build a new one with ``dataclasses.replace``.
An item hashes on ``(content, source, score)`` so duplicates from two sources collapse in a set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from core.contracts.protocols import Ctx
from core.serialization import FrozenDict, freeze_mapping

__all__ = ["MemoryItem", "MemorySource"]


def _empty() -> Mapping[str, Any]:
    return FrozenDict()


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One recalled piece of text, with the backend that produced it and how relevant it judged it."""

    content: str
    source: str
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=_empty)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", freeze_mapping(self.metadata))

    def __hash__(self) -> int:
        return hash((self.content, self.source, self.score))


@runtime_checkable
class MemorySource(Protocol):
    """Something an agent can recall from; ``where`` filters on backend metadata."""

    @property
    def name(self) -> str: ...

    async def query(
        self, query: str, *, k: int = 5, ctx: Ctx | None = None, where: Mapping[str, Any] | None = None
    ) -> list[MemoryItem]: ...

    async def write(self, items: Iterable[MemoryItem], *, ctx: Ctx | None = None) -> None: ...
