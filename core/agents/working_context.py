"""``WorkingContext``: a transcript to seed a run with, built up and merged as a value.

``agent.run(task, ctx, context=WorkingContext(...))`` puts the context's messages between the
agent's system prompt (and grounding) and the task. A ``WorkingContext`` is immutable: ``add`` and
``merge`` return a new one, so one context can seed several runs without any of them seeing
another's changes.

``merge(other, mode=...)`` combines two transcripts, the way a coordinator joins what its workers
saw:

* ``"append"`` (the default): this context's messages, then all of ``other``'s;
* ``"union"``: every distinct message once, in first-seen order (this context's first). Equality is
  the messages' own (role, content, name, tool call id and tool calls), and it works on assistant
  turns carrying tool calls, whose arguments are frozen dicts: ``Message`` hashes through
  ``ToolCall``'s identity hash, and equal hashes are confirmed by full equality.

``WorkingContext.of(result)`` starts from an ``AgentResult``'s transcript (its system messages left
out, since the next agent brings its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from core.contracts.types import Message, Role

__all__ = ["WorkingContext"]

_MODES = ("append", "union")


@dataclass(frozen=True, slots=True)
class WorkingContext:
    """An immutable transcript to seed a run with."""

    messages: tuple[Message, ...] = ()

    def __post_init__(self) -> None:
        messages = tuple(self.messages)
        for message in messages:
            if not isinstance(message, Message):
                raise TypeError(f"a WorkingContext holds Message values, got {type(message).__name__}")
        object.__setattr__(self, "messages", messages)

    @classmethod
    def of(cls, source: Any) -> WorkingContext:
        """From a sequence of messages, or anything with ``messages`` (an ``AgentResult``), minus system."""
        messages: Sequence[Message] = getattr(source, "messages", source)
        return cls(tuple(m for m in messages if m.role != Role.SYSTEM))

    def add(self, *messages: Message) -> WorkingContext:
        return WorkingContext((*self.messages, *messages))

    def merge(self, other: WorkingContext | Iterable[Message], mode: str = "append") -> WorkingContext:
        """This transcript combined with ``other`` (see the module notes for the modes)."""
        if mode not in _MODES:
            raise ValueError(f"merge mode must be one of {_MODES}, got {mode!r}")
        theirs = other.messages if isinstance(other, WorkingContext) else tuple(other)
        if mode == "append":
            return WorkingContext((*self.messages, *theirs))
        seen: set[Message] = set()
        merged: list[Message] = []
        for message in (*self.messages, *theirs):
            if message not in seen:
                seen.add(message)
                merged.append(message)
        return WorkingContext(tuple(merged))

    def last(self, n: int) -> WorkingContext:
        """The last ``n`` messages."""
        return WorkingContext(self.messages[-n:] if n > 0 else ())

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)
