"""A tracer that keeps every span it opens, so a test can assert on what was traced.

``RecordingTracer`` satisfies ``TracePort``. Spans are appended to ``.spans`` when they OPEN, so the
list reads in the order the work started (an outer span before the spans nested in it); the optional
``exporter`` callable receives each span when it CLOSES, for a test that wants a flat list of finished
spans. A span records its attributes (``.attrs``), events (``.events``), its parent, and the exception
that ended it, if any.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

_current: ContextVar[RecordingSpan | None] = ContextVar("keel_recording_span", default=None)
_ids = itertools.count(1)


@dataclass(eq=False)
class RecordingSpan:
    """One span as recorded: name, kind, attributes, events, and how it ended."""

    name: str
    kind: str
    attrs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    parent: RecordingSpan | None = None
    span_id: str = ""
    ended: bool = False
    error: BaseException | None = None
    owner: object = field(default=None, repr=False)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attrs[key] = value

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        self.events.append((name, dict(attrs or {})))


class RecordingTracer:
    """A ``TracePort`` that records; ``exporter`` (optional) is called with each span as it closes."""

    def __init__(self, exporter: Callable[[RecordingSpan], object] | None = None) -> None:
        self.spans: list[RecordingSpan] = []
        self._exporter = exporter

    @contextmanager
    def span(
        self, name: str, kind: str = "internal", attrs: Mapping[str, Any] | None = None
    ) -> Iterator[RecordingSpan]:
        parent = _current.get()
        if parent is not None and not self._owns(parent):
            parent = None
        span = RecordingSpan(
            name, kind, dict(attrs or {}), parent=parent, span_id=f"span-{next(_ids)}", owner=self
        )
        self.spans.append(span)
        token = _current.set(span)
        try:
            yield span
        except GeneratorExit:
            raise  # the consumer stopped iterating; nothing failed
        except BaseException as exc:
            span.error = exc
            raise
        finally:
            try:
                _current.reset(token)
            except ValueError:
                # Closed from another context (an async generator finalised elsewhere).
                _current.set(parent)
            span.ended = True
            if self._exporter is not None:
                self._exporter(span)

    def current_span_id(self) -> str | None:
        span = _current.get()
        return span.span_id if span is not None and self._owns(span) else None

    def add_event_to_current_span(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        span = _current.get()
        if span is not None and self._owns(span):
            span.add_event(name, attrs)

    def by_name(self, name: str) -> list[RecordingSpan]:
        """The recorded spans called ``name``, in opening order."""
        return [s for s in self.spans if s.name == name]

    def _owns(self, span: RecordingSpan) -> bool:
        return span.owner is self
