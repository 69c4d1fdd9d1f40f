"""``FakeGrounder`` and ``FakeCompactor``: the agent's request-assembly seams, recording their use.

``FakeGrounder`` answers with fixed text (or a function of the task) and keeps each ``(ctx, task)``
it was called with in ``.calls``. ``FakeCompactor`` counts its calls in ``.called`` and returns the
transcript unchanged, or only its last ``keep_last`` messages when that is set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.contracts.protocols import Ctx
from core.contracts.types import Message

__all__ = ["FakeCompactor", "FakeGrounder"]


class FakeGrounder:
    """A ``Grounder`` returning ``grounding`` (a string, or a function of the task)."""

    def __init__(self, grounding: str | Callable[[str], str] = "") -> None:
        self._grounding = grounding
        self.calls: list[tuple[Ctx, str]] = []

    async def __call__(self, ctx: Ctx, task: str) -> str:
        self.calls.append((ctx, task))
        grounding = self._grounding
        return grounding if isinstance(grounding, str) else grounding(task)


class FakeCompactor:
    """A ``Compactor`` that counts its calls and optionally keeps only the last messages."""

    def __init__(self, keep_last: int | None = None) -> None:
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {keep_last!r}")
        self._keep_last = keep_last
        self.called = 0

    async def compact(self, messages: Sequence[Message], ctx: Ctx) -> list[Message]:
        self.called += 1
        if self._keep_last is None:
            return list(messages)
        return list(messages[-self._keep_last :])
