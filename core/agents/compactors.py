"""``WindowCompactor``: the shipped ``Compactor``, keeping the system messages and a recent window.

``WindowCompactor(max_messages=N)`` leaves a transcript of at most ``N`` non-system messages as it
is (a compactor owns its threshold). A longer one becomes: every system message, in place at the
front, then a note saying how many messages were left out (a system message named ``compaction``),
then the last ``N`` non-system messages, with the window's start moved back so that a ``tool``
message is never separated from the assistant turn whose tool call it answers (a provider refuses a
transcript that starts with an orphaned tool result). ``note=False`` leaves the note out.

Use it as an agent's ``compactor=`` or in the chain with ``core.policies.compaction``.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.contracts.types import Message, Role

__all__ = ["WindowCompactor"]


class WindowCompactor:
    """Keeps system messages and the last ``max_messages`` others, never orphaning a tool result."""

    def __init__(self, max_messages: int, *, note: bool = True) -> None:
        if max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, got {max_messages!r}")
        self.max_messages = max_messages
        self.note = note

    async def compact(self, messages: Sequence[Message], ctx: object) -> list[Message]:
        system = [m for m in messages if m.role == Role.SYSTEM]
        rest = [m for m in messages if m.role != Role.SYSTEM]
        if len(rest) <= self.max_messages:
            return list(messages)
        start = len(rest) - self.max_messages
        while start > 0 and rest[start].role == Role.TOOL:
            start -= 1
        kept = rest[start:]
        dropped = len(rest) - len(kept)
        if dropped == 0:
            return list(messages)
        out = list(system)
        if self.note:
            out.append(Message(Role.SYSTEM, f"[{dropped} earlier message(s) left out]", name="compaction"))
        out.extend(kept)
        return out
