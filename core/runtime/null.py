"""Production null objects: the defaults that make ``Services()`` usable with no arguments.

``NoopObserver``, ``NoopTrace``, ``NoopMetrics`` and ``NoopReplayStore`` accept everything and keep
nothing (a replay store that finds nothing means every step runs for real); ``SystemClock``
is the real wall clock. They are shipped code, not test doubles: a run with no tracer wired still calls
``ctx.trace.span(...)``, and these are what answer. (Test doubles that *record* live in
``core.testing`` and are named ``Fake*`` / ``Recording*``.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from core.contracts.ports import Observation


class NoopSpan:
    """A span that ignores its attributes and events; it is also its own context manager."""

    __slots__ = ()

    def __enter__(self) -> NoopSpan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        return None


_NOOP_SPAN = NoopSpan()


class NoopTrace:
    """A ``TracePort`` that opens nothing: every span is the shared ``NoopSpan``."""

    __slots__ = ()

    def span(self, name: str, kind: str = "internal", attrs: Mapping[str, Any] | None = None) -> NoopSpan:
        # No generator and no allocation: an untraced run pays one method call per span.
        return _NOOP_SPAN

    def current_span_id(self) -> str | None:
        return None

    def add_event_to_current_span(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        return None


class NoopObserver:
    """An ``ObserverPort`` that drops every observation."""

    __slots__ = ()

    async def emit(self, observation: Observation) -> None:
        return None

    async def close(self) -> None:
        return None


class NoopMetrics:
    """A ``MetricsPort`` that records nothing."""

    __slots__ = ()

    def add_counter(self, name: str, value: float = 1, attrs: Mapping[str, Any] | None = None) -> None:
        return None

    def record_histogram(self, name: str, value: float, attrs: Mapping[str, Any] | None = None) -> None:
        return None


class SystemClock:
    """The real ``ClockPort``: unix time and a non-blocking sleep."""

    __slots__ = ()

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class NoopReplayStore:
    """A ``ReplayStorePort`` that records nothing and finds nothing."""

    __slots__ = ()

    async def record(self, run_id: str, key: str, value: Any) -> None:
        return None

    async def lookup(self, run_id: str, key: str) -> Any | None:
        return None

    async def forget(self, run_id: str) -> None:
        return None
