"""What a transaction deferred, kept as runs: one statement text with the parameters of each time
it was deferred in a row.

Both engines send a run of more than one as a single batch (sqlite3's and asyncpg's
``executemany``), so the usual loop of deferred INSERTs costs one call rather than one per row.
Runs are formed as statements are deferred (a comparison each), not found again at the flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DeferredRuns = list[tuple[str, list[Sequence[Any]]]]
"""Statement texts in the order they were deferred, each with the parameters of its run."""


def add_deferred(runs: DeferredRuns, text: str, params: Sequence[Any], *, batchable: bool = True) -> None:
    """Defer ``text`` with ``params``: into the last run when it is the same text and the engine
    can batch it, else as a run of its own."""
    if batchable and runs and runs[-1][0] == text:
        runs[-1][1].append(params)
    else:
        runs.append((text, [params]))
