"""RecordingTracer / RecordingSpan: spans in opening order, attributes, events, parents, errors."""

from __future__ import annotations

import asyncio

import pytest

from core.contracts.ports import Span, TracePort
from core.testing import RecordingSpan, RecordingTracer


def test_satisfies_the_port() -> None:
    tracer = RecordingTracer()
    assert isinstance(tracer, TracePort)
    with tracer.span("s") as span:
        assert isinstance(span, Span)


def test_records_spans_in_opening_order_with_parents_attrs_and_events() -> None:
    tracer = RecordingTracer()
    assert tracer.current_span_id() is None
    with tracer.span("outer", "client", {"a": 1}) as outer:
        outer.set_attribute("b", 2)
        with tracer.span("inner") as inner:
            assert tracer.current_span_id() == inner.span_id
            tracer.add_event_to_current_span("cache.hit", {"key": "k"})
        inner.add_event("late")
    assert [(s.name, s.kind) for s in tracer.spans] == [("outer", "client"), ("inner", "internal")]
    assert outer.attrs == {"a": 1, "b": 2} and inner.parent is outer and outer.parent is None
    assert inner.events == [("cache.hit", {"key": "k"}), ("late", {})]
    assert outer.ended and inner.ended and tracer.by_name("inner") == [inner]
    tracer.add_event_to_current_span("nowhere")  # no open span: ignored


def test_the_exporter_receives_spans_as_they_close() -> None:
    closed: list[RecordingSpan] = []
    tracer = RecordingTracer(exporter=closed.append)
    with tracer.span("outer"):
        with tracer.span("inner"):
            pass
    assert [s.name for s in closed] == ["inner", "outer"]


def test_an_exception_is_recorded_and_propagates() -> None:
    tracer = RecordingTracer()
    with pytest.raises(KeyError):
        with tracer.span("failing"):
            raise KeyError("x")
    (span,) = tracer.spans
    assert isinstance(span.error, KeyError) and span.ended


def test_two_tracers_do_not_see_each_others_spans() -> None:
    first, second = RecordingTracer(), RecordingTracer()
    with first.span("a"):
        assert second.current_span_id() is None
        with second.span("b") as b:
            assert b.parent is None
    assert [s.name for s in first.spans] == ["a"] and [s.name for s in second.spans] == ["b"]


async def test_concurrent_tasks_keep_their_own_current_span() -> None:
    tracer = RecordingTracer()

    async def work(name: str) -> str | None:
        with tracer.span(name):
            await asyncio.sleep(0)
            return tracer.current_span_id()

    ids = await asyncio.gather(work("x"), work("y"))
    assert list(ids) == [tracer.spans[0].span_id, tracer.spans[1].span_id]
