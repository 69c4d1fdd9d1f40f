"""``FakeMemory``: a ``MemorySource`` answered from fixtures.

Two modes. With ``responses={substring: items}`` a query gets the items of the first key found in
the query text (``[]`` when none matches). With ``items=[...]`` the query text is ignored and the
first ``k`` items come back, for a test that only needs the agent to receive something. Passing both
is refused. ``.queries`` records ``(query, k, where)`` for each call and ``.writes`` every item
written, in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.contracts.protocols import Ctx
from core.state.memory import MemoryItem

__all__ = ["FakeMemory"]


class FakeMemory:
    """A ``MemorySource`` over substring responses or a fixed list of items."""

    def __init__(
        self,
        responses: Mapping[str, Sequence[MemoryItem]] | None = None,
        *,
        items: Sequence[MemoryItem] | None = None,
        name: str = "fake_memory",
    ) -> None:
        if responses is not None and items is not None:
            raise ValueError("FakeMemory takes responses= or items=, not both")
        self._responses = dict(responses) if responses is not None else None
        self._items = list(items) if items is not None else []
        self._name = name
        self.queries: list[tuple[str, int, Mapping[str, Any] | None]] = []
        self.writes: list[MemoryItem] = []

    @property
    def name(self) -> str:
        return self._name

    async def query(
        self, query: str, *, k: int = 5, ctx: Ctx | None = None, where: Mapping[str, Any] | None = None
    ) -> list[MemoryItem]:
        self.queries.append((query, k, where))
        if self._responses is None:
            return self._items[: max(k, 0)]
        for key, found in self._responses.items():
            if key in query:
                return list(found)[: max(k, 0)]
        return []

    async def write(self, items: Iterable[MemoryItem], *, ctx: Ctx | None = None) -> None:
        self.writes.extend(items)
