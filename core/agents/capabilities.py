"""The two seams an agent's request assembly accepts: grounding text in, and compacting the transcript.

``Grounder`` is anything async-callable as ``(ctx, task) -> str``: the text that grounds a task (from
memory, a file, a search). Retrieval policy (which source, how many items, how to render them) is
baked into the callable where it is wired, so the agent only ever sees text. ``Compactor`` shrinks a
transcript before it is sent and owns its own threshold: calling it on a transcript that is already
small enough returns it unchanged.

An ``Agent`` uses both when given them: the grounding becomes a system message ahead of the task, and
the compactor runs on the transcript before each model call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Protocol, runtime_checkable

from core.contracts.protocols import Ctx
from core.contracts.types import Message

__all__ = ["Compactor", "Grounder"]


@runtime_checkable
class Grounder(Protocol):
    """Returns the text that grounds ``task`` for this run."""

    def __call__(self, ctx: Ctx, task: str) -> Awaitable[str]: ...


@runtime_checkable
class Compactor(Protocol):
    """Returns ``messages`` or a shorter transcript standing in for them."""

    async def compact(self, messages: Sequence[Message], ctx: Ctx) -> list[Message]: ...
