"""The ``tool_call_total`` counter and ``tool_call_duration`` histogram, fed by the registry's sink.

The registry calls its metrics sinks synchronously inside every proxied tool call, and an
OpenTelemetry SDK ``record``/``add`` costs several microseconds (attribute cleaning and hashing),
so recording there would tax every call twice over. The sink is therefore just ``deque.append`` of
the record the registry already built; a daemon thread drains the queue into the instruments
every ``DRAIN_INTERVAL`` seconds, off the event loop, and :meth:`CallMetrics.drain` runs on flush
and on shutdown so nothing acknowledged is lost. Counts are summed per (tool, method, outcome)
before they reach the counter, so a busy method costs one ``add`` per drain, not one per call.

Attributes: ``keel.tool``, ``keel.method`` and ``keel.outcome`` (``ok`` or ``error``). Durations are
in milliseconds, the unit the registry measures in and the one the SDK's default histogram
buckets are laid out for.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("keel.telemetry")

DRAIN_INTERVAL = 1.0
COUNTER_NAME = "tool_call_total"
HISTOGRAM_NAME = "tool_call_duration"


class CallMetrics:
    """Owns the two instruments, the pending queue and the thread that drains it."""

    def __init__(self, meter: Any, *, interval: float = DRAIN_INTERVAL) -> None:
        self._counter = meter.create_counter(
            COUNTER_NAME, unit="{call}", description="Tool calls made through the ToolProxy"
        )
        self._histogram = meter.create_histogram(
            HISTOGRAM_NAME, unit="ms", description="Duration of tool calls made through the ToolProxy"
        )
        self._pending: deque[dict[str, Any]] = deque()
        self._attributes: dict[tuple[str, str, bool], dict[str, str]] = {}
        self._lock = threading.Lock()
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def sink(self) -> Callable[[dict[str, Any]], None]:
        """The callable to hand to ``registry.add_metrics_sink`` (one deque append per call)."""
        return self._pending.append

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="keel-telemetry-metrics", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and drain what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.drain()

    def drain(self) -> int:
        """Record every pending call in the instruments; return how many there were."""
        with self._lock:
            pending = self._pending
            counts: Counter[tuple[str, str, bool]] = Counter()
            record = self._histogram.record
            drained = 0
            while True:
                try:
                    entry = pending.popleft()
                except IndexError:
                    break
                key = (entry["tool"], entry["method"], bool(entry["success"]))
                counts[key] += 1
                record(entry["duration_ms"], self._attributes_for(key))
                drained += 1
            for key, count in counts.items():
                self._counter.add(count, self._attributes_for(key))
            return drained

    def _attributes_for(self, key: tuple[str, str, bool]) -> dict[str, str]:
        attributes = self._attributes.get(key)
        if attributes is None:
            tool, method, success = key
            outcome = "ok" if success else "error"
            attributes = {"keel.tool": tool, "keel.method": method, "keel.outcome": outcome}
            self._attributes[key] = attributes
        return attributes

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.drain()
            except Exception:  # keep draining: one bad record must not stop metrics for good
                log.exception("draining tool-call metrics failed")
