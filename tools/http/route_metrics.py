"""Per-route request metrics: rate, latency percentiles and errors by status, bounded like the ring buffer.

Each registered route (method and path template, so ``/items/{id}`` is one route however many ids
are asked for) keeps the durations of its last ``window`` requests for percentiles, a count per
status code, and the request counts of the last ``buckets`` ten-second buckets for a rate and a
sparkline. Memory is therefore bounded by the number of registered routes, never by traffic or by
the paths clients make up: a request no route matched is not recorded here (the access log has it).

An event stream's duration is how long the client stayed, not how fast it was served, so its
requests count toward the rate and the status codes but not toward the latency percentiles.

The numbers are per process, like the tool-call ring buffer: behind a load balancer each process
reports what it served.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from core.registry import nearest_rank

DEFAULT_WINDOW = 1000
BUCKET_SECONDS = 10.0
DEFAULT_BUCKETS = 30  # five minutes of ten-second buckets
PENDING_BATCH = 256  # requests recorded before they are counted (so memory stays bounded)


def percentile(ordered: list[float], percent: int) -> float | None:
    """The nearest-rank percentile of already sorted values (``None`` when there are none)."""
    return nearest_rank(ordered, percent) if ordered else None


class RouteStats:
    """What one route has served."""

    __slots__ = ("buckets", "count", "durations", "statuses")

    def __init__(self, window: int, buckets: int) -> None:
        self.count = 0
        self.durations: deque[float] = deque(maxlen=window)
        self.statuses: dict[int, int] = {}
        self.buckets: deque[list[float]] = deque(maxlen=buckets)  # [bucket start, requests]

    def add(self, status: int, duration_ms: float | None, now: float) -> None:
        self.count += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if duration_ms is not None:
            self.durations.append(duration_ms)
        start = now - now % BUCKET_SECONDS
        if self.buckets and self.buckets[-1][0] == start:
            self.buckets[-1][1] += 1
        else:
            self.buckets.append([start, 1])


class RouteMetrics:
    """Every route's :class:`RouteStats`; ``record`` is called once per request on any thread."""

    def __init__(
        self,
        window: int = DEFAULT_WINDOW,
        buckets: int = DEFAULT_BUCKETS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window = window
        self.bucket_count = buckets
        self.clock = clock
        self._routes: dict[tuple[str, str], RouteStats] = {}
        self._lock = threading.Lock()
        # Requests recorded but not yet counted: appending is atomic, so recording takes no lock
        # (a lock and the counting were most of what measuring a request cost); they are counted
        # in batches, and before anything reads or drops the counts.
        self._pending: deque[tuple[str, str, int, float | None, float]] = deque()

    def record(self, method: str, path: str, status: int, duration_ms: float | None) -> None:
        pending = self._pending
        pending.append((method, path, status, duration_ms, self.clock()))
        if len(pending) >= PENDING_BATCH:
            self._count_pending()

    def _count_pending(self) -> None:
        # RouteStats.add inlined, with the last route's stats and ten-second bucket kept between
        # records (a batch is mostly one route, in one bucket): this runs once per request.
        with self._lock:
            pending = self._pending
            routes = self._routes
            key: tuple[str, str] | None = None
            stats: RouteStats | None = None
            bucket_start = bucket_end = 0.0
            bucket: list[float] | None = None
            while pending:
                try:
                    method, path, status, duration_ms, now = pending.popleft()
                except IndexError:  # pragma: no cover - another thread took the last one
                    break
                if stats is None or key != (method, path):
                    key = (method, path)
                    stats = routes.get(key)
                    if stats is None:
                        stats = routes[key] = RouteStats(self.window, self.bucket_count)
                    bucket = None
                stats.count += 1
                statuses = stats.statuses
                statuses[status] = statuses.get(status, 0) + 1
                if duration_ms is not None:
                    stats.durations.append(duration_ms)
                if bucket is None or not bucket_start <= now < bucket_end:
                    start = now - now % BUCKET_SECONDS
                    buckets = stats.buckets
                    if buckets and buckets[-1][0] == start:
                        bucket = buckets[-1]
                    else:
                        bucket = [start, 0]
                        buckets.append(bucket)
                    bucket_start, bucket_end = start, start + BUCKET_SECONDS
                bucket[1] += 1

    def forget(self, method: str, path: str) -> None:
        """Drop a route that is no longer served (its plugin was unloaded)."""
        self._count_pending()
        with self._lock:
            self._routes.pop((method, path), None)

    def snapshot(self) -> list[dict[str, Any]]:
        """Each route: count, requests per second over the last minute, p50/p95/p99 ms, statuses,
        errors (4xx and 5xx), and the per-bucket counts (oldest first, empty buckets as 0)."""
        self._count_pending()
        now = self.clock()
        current = now - now % BUCKET_SECONDS
        with self._lock:
            items = [
                (
                    key,
                    stats.count,
                    sorted(stats.durations),
                    dict(stats.statuses),
                    [tuple(b) for b in stats.buckets],
                )
                for key, stats in self._routes.items()
            ]
        result = []
        for (method, path), count, ordered, statuses, buckets in sorted(
            items, key=lambda item: item[0][::-1]
        ):
            by_start = {start: n for start, n in buckets}
            series = [
                int(by_start.get(current - BUCKET_SECONDS * back, 0))
                for back in range(self.bucket_count - 1, -1, -1)
            ]
            last_minute = sum(series[-6:])
            result.append(
                {
                    "method": method,
                    "path": path,
                    "count": count,
                    "rate_per_s": round(last_minute / 60.0, 3),
                    "p50_ms": _rounded(percentile(ordered, 50)),
                    "p95_ms": _rounded(percentile(ordered, 95)),
                    "p99_ms": _rounded(percentile(ordered, 99)),
                    "statuses": {str(code): n for code, n in sorted(statuses.items())},
                    "errors": sum(n for code, n in statuses.items() if code >= 400),
                    "server_errors": sum(n for code, n in statuses.items() if code >= 500),
                    "series": series,
                    "bucket_seconds": BUCKET_SECONDS,
                }
            )
        return result


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
