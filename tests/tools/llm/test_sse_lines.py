"""Server-sent-event framing as a chat stream uses it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from tools.llm.sse_lines import SseEvent, sse_events


async def lines(items: Iterable[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


async def events(*items: str) -> list[SseEvent]:
    return [event async for event in sse_events(lines(items))]


async def test_data_lines_join_and_a_blank_line_completes_the_event() -> None:
    assert await events("data: a", "data:b", "", "data: c", "") == [SseEvent("a\nb"), SseEvent("c")]


async def test_comments_and_unknown_fields_are_ignored_and_event_names_kept() -> None:
    assert await events(": ping", "id: 7", "retry: 10", "event: error", "data: {}", "") == [
        SseEvent("{}", "error")
    ]


async def test_an_event_cut_off_by_the_end_is_dropped_except_done() -> None:
    assert await events('data: {"half"') == []
    assert await events("data: [DONE]") == [SseEvent("[DONE]")]


async def test_carriage_returns_are_stripped() -> None:
    assert await events("data: x\r", "\r") == [SseEvent("x")]
