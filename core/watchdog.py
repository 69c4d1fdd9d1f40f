"""The event-loop watchdog: notices when plugin code holds the loop, says whose code it was.

A callback on the loop records a heartbeat every ``interval`` seconds; a daemon thread checks it.
When the heartbeat is older than ``LOOP_STALL_THRESHOLD`` seconds (default 1), the thread takes the
loop thread's stack once, finds the innermost frame in a plugin file (so the plugin id), and logs
a warning with the stack. When the loop comes back the stall is counted: ``stalls``, the seconds
``stalled_s``, and the ``last`` one (plugin, file:line, duration), all in the dump's
``kernel.loop`` and in ``/system/metrics``. Liveness fails (``unhealthy``) while the loop has been
stalled for more than ``LOOP_STALL_LIVENESS`` seconds (default 10) within the last minute: a
process that keeps freezing needs a restart, one slow request does not.

The same thread samples the process's resident memory every ``RSS_SAMPLE_SECONDS`` (default 10):
the dump's ``kernel.memory`` shows the current RSS and its trend over the kept samples.

The cost on the loop is one ``call_later`` per ``interval`` (0.1 s by default).
"""

from __future__ import annotations

import _thread
import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("keel.watchdog")

LIVENESS_WINDOW = 60.0
RSS_SAMPLES = 60


def rss_bytes() -> int | None:
    """The resident set size of this process (Linux ``/proc``; ``None`` elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class LoopWatchdog:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        attribute: Callable[[str], str | None],
        *,
        threshold: float = 1.0,
        liveness: float = 10.0,
        interval: float = 0.1,
        rss_every: float = 10.0,
    ) -> None:
        self.loop = loop
        self.attribute = attribute
        self.threshold = threshold
        self.liveness = liveness
        self.interval = interval
        self.rss_every = rss_every
        self.stalls = 0
        self.stalled_s = 0.0
        self.last: dict[str, Any] | None = None
        self.recent: deque[tuple[float, float]] = deque(maxlen=1000)  # (ended at, seconds)
        self.rss: deque[tuple[float, int]] = deque(maxlen=RSS_SAMPLES)
        self._beat = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._current: dict[str, Any] | None = None
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
        self._handle = self.loop.call_later(self.interval, self._heartbeat)
        # A bare daemon thread: ``threading.Thread.start()`` waits until the new thread has been
        # scheduled, and on a busy machine that wait was the largest single cost of boot.
        _thread.start_new_thread(self._watch, ())

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()

    def _heartbeat(self) -> None:
        now = time.monotonic()
        gap = now - self._beat
        self._beat = now
        if gap - self.interval >= self.threshold:
            self._ended(gap - self.interval)
        if not self._stop.is_set():
            self._handle = self.loop.call_later(self.interval, self._heartbeat)

    def _ended(self, seconds: float) -> None:
        stall = self._current or {"plugin": None, "where": None}
        self._current = None
        self.stalls += 1
        self.stalled_s += seconds
        self.recent.append((time.monotonic(), seconds))
        self.last = {**stall, "seconds": round(seconds, 3), "at": time.time()}
        log.warning(
            "the event loop was stalled for %.2fs by %s (%s)",
            seconds,
            stall.get("plugin") or "code outside any plugin",
            stall.get("where") or "?",
        )

    def _watch(self) -> None:
        next_rss = 0.0
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            if now >= next_rss:
                size = rss_bytes()
                if size is not None:
                    self.rss.append((time.time(), size))
                next_rss = now + self.rss_every
            if self._current is None and now - self._beat > self.threshold + self.interval:
                self._current = self._blame()

    def _blame(self) -> dict[str, Any]:
        frame = sys._current_frames().get(self._loop_thread)
        stack = traceback.extract_stack(frame) if frame is not None else []
        plugin = where = None
        for entry in reversed(stack):
            owner = self.attribute(entry.filename)
            if owner is not None:
                plugin, where = owner, f"{entry.filename}:{entry.lineno}"
                break
        log.warning(
            "the event loop has been stalled for over %.1fs by %s; its stack:\n%s",
            self.threshold,
            plugin or "code outside any plugin",
            "".join(traceback.format_list(stack[-12:])),
        )
        return {"plugin": plugin, "where": where}

    def report(self) -> dict[str, Any]:
        """What the dump shows under ``kernel.loop``."""
        now = time.monotonic()
        window = sum(s for ended, s in self.recent if now - ended <= LIVENESS_WINDOW)
        return {
            "stalls": self.stalls,
            "stalled_s": round(self.stalled_s, 3),
            "last": dict(self.last) if self.last else None,
            "stalled_s_last_minute": round(window, 3),
            "unhealthy": window > self.liveness,
            "threshold_s": self.threshold,
        }

    def memory(self) -> dict[str, Any]:
        """What the dump shows under ``kernel.memory``: RSS now and its trend over the samples."""
        samples = list(self.rss)
        if not samples:
            size = rss_bytes()
            return {"rss_mib": round(size / 2**20, 1) if size else None, "trend_mib_per_min": None}
        (t0, first), (t1, last) = samples[0], samples[-1]
        minutes = (t1 - t0) / 60
        return {
            "rss_mib": round(last / 2**20, 1),
            "first_mib": round(first / 2**20, 1),
            "window_s": round(t1 - t0, 1),
            "trend_mib_per_min": round((last - first) / 2**20 / minutes, 2) if minutes > 0 else None,
        }
