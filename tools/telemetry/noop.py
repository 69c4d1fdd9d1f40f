"""Stand-ins for a tracer and a meter when OpenTelemetry is off or not installed.

They accept the calls plugin code makes on the real objects (``start_as_current_span`` as a context
manager or decorator, ``start_span``, ``set_attribute``, ``record_exception``, counters and
histograms ...) and do nothing, so a plugin traces unconditionally and never checks a flag. The
span handed out is an object that ignores every method, not ``None``, so ``with ... as span:
span.set_attribute(...)`` works too. Only the standard library is used, so these work even when
the OpenTelemetry packages are missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class NoOpSpan:
    """A span that records nothing; every method accepts anything and returns ``None``."""

    def is_recording(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Callable[..., None]:
        return _ignore

    def __enter__(self) -> NoOpSpan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


class NoOpTracer:
    """A tracer whose spans record nothing."""

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> NoOpSpan:
        return NOOP_SPAN

    @contextmanager
    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Iterator[NoOpSpan]:
        yield NOOP_SPAN


class NoOpInstrument:
    """A counter, histogram or gauge that records nothing."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return _ignore


class NoOpMeter:
    """A meter whose instruments record nothing."""

    def __getattr__(self, name: str) -> Callable[..., NoOpInstrument]:
        if not name.startswith("create_"):
            raise AttributeError(name)
        return _instrument


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


def _instrument(*args: Any, **kwargs: Any) -> NoOpInstrument:
    return NOOP_INSTRUMENT


NOOP_SPAN = NoOpSpan()
NOOP_INSTRUMENT = NoOpInstrument()
