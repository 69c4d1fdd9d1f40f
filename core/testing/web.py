"""``FakeSearch`` and ``FakeFetch``: the web, answered from fixtures.

``FakeSearch`` maps query substrings to hits (the first key found in the query wins) and answers an
unmatched query with ``[]``, like a search engine that found nothing. ``FakeFetch`` maps exact URLs to
responses and raises ``KeyError`` for any other URL: a silent stub page would let a test pass on a
fetch it never meant to make. Both count their calls in ``.calls`` and keep what they were asked in
``.queries`` / ``.urls``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.contracts.ports import FetchResponse, SearchHit

__all__ = ["FakeFetch", "FakeSearch"]


class FakeSearch:
    """A ``SearchPort`` over ``{query substring: hits}``."""

    def __init__(self, results: Mapping[str, Sequence[SearchHit]] | None = None) -> None:
        self._results = dict(results or {})
        self.calls = 0
        self.queries: list[str] = []

    async def search(
        self, query: str, k: int = 5, *, where: Mapping[str, Any] | None = None
    ) -> list[SearchHit]:
        self.calls += 1
        self.queries.append(query)
        for key, hits in self._results.items():
            if key in query:
                return list(hits)[: max(k, 0)]
        return []


class FakeFetch:
    """A ``FetchPort`` over ``{url: response}``; any other URL is a ``KeyError``."""

    def __init__(self, pages: Mapping[str, FetchResponse] | None = None) -> None:
        self._pages = dict(pages or {})
        self.calls = 0
        self.urls: list[str] = []

    async def fetch(self, url: str, *, timeout_s: float = 10.0) -> FetchResponse:
        self.calls += 1
        self.urls.append(url)
        try:
            return self._pages[url]
        except KeyError:
            raise KeyError(f"FakeFetch has no page for {url}") from None
