"""Server-sent events from a stream of text lines: the framing a chat-completions stream uses.

Per the SSE format: a ``data:`` line adds to the current event's data (several are joined with
newlines, and one space after the colon is dropped), a blank line completes the event, a line
starting with ``:`` is a comment (servers send them as keep-alives), and ``event:`` names the event.
Other fields (``id:``, ``retry:``) mean nothing to a chat stream and are ignored.

An event still open when the lines end was cut off mid-way and is dropped, as the format says,
except a bare ``[DONE]``: some servers close the connection right after it without the blank line.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class SseEvent:
    data: str
    event: str | None = None


async def sse_events(lines: AsyncIterator[str]) -> AsyncGenerator[SseEvent, None]:
    data: list[str] = []
    event: str | None = None
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent("\n".join(data), event)
            data, event = [], None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    if data and "\n".join(data).strip() == DONE:
        yield SseEvent(DONE, event)
