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


def percentile(ordered: list[float], percent: int) -> float | None:
    """The nearest-rank percentile of already sorted values (``None`` when there are none)."""
    return nearest_rank(ordered, percent) if ordered else None


class RouteStats:
    """What one route has served. ``add`` runs once per request on the serving loop's thread (no
    lock: a reader on another thread copies each field whole, which the GIL keeps consistent)."""

    __slots__ = ("bucket", "bucket_end", "bucket_start", "buckets", "count", "durations", "statuses")

    def __init__(self, window: int, buckets: int) -> None:
        self.count = 0
        self.durations: deque[float] = deque(maxlen=window)
        self.statuses: dict[int, int] = {}
        self.buckets: deque[list[float]] = deque(maxlen=buckets)  # [bucket start, requests]
        # The ten-second bucket being counted, kept so a request in it costs one comparison.
        self.bucket: list[float] = [0.0, 0]
        self.bucket_start = float("inf")
        self.bucket_end = float("-inf")

    def add(self, status: int, duration_ms: float | None, now: float) -> None:
        self.count += 1
        statuses = self.statuses
        statuses[status] = statuses.get(status, 0) + 1
        if duration_ms is not None:
            self.durations.append(duration_ms)
        if self.bucket_start <= now < self.bucket_end:
            self.bucket[1] += 1
        else:
            self._enter_bucket(now)

    def _enter_bucket(self, now: float) -> None:
        start = now - now % BUCKET_SECONDS
        buckets = self.buckets
        if buckets and buckets[-1][0] == start:
            bucket = buckets[-1]
        else:
            bucket = [start, 0]
            buckets.append(bucket)
        bucket[1] += 1
        self.bucket = bucket
        self.bucket_start, self.bucket_end = start, start + BUCKET_SECONDS


class RouteMetrics:
    """Every route's :class:`RouteStats`, recorded on the serving loop's thread."""

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
        self._lock = threading.Lock()  # for adding, dropping and listing routes, not for counting

    def stats(self, method: str, path: str) -> RouteStats:
        """The route's stats, made on first use: what a caller serving the route keeps, so that a
        request costs one ``add`` (the route looked up per request, or queued and counted later,
        was most of what measuring a request cost)."""
        stats = self._routes.get((method, path))
        if stats is None:
            with self._lock:
                stats = self._routes.setdefault((method, path), RouteStats(self.window, self.bucket_count))
        return stats

    def record(self, method: str, path: str, status: int, duration_ms: float | None) -> None:
        self.stats(method, path).add(status, duration_ms, self.clock())

    def forget(self, method: str, path: str) -> None:
        """Drop a route that is no longer served (its plugin was unloaded)."""
        with self._lock:
            self._routes.pop((method, path), None)

    def snapshot(self) -> list[dict[str, Any]]:
        """Each route: count, requests per second over the last minute, p50/p95/p99 ms, statuses,
        errors (4xx and 5xx), and the per-bucket counts (oldest first, empty buckets as 0)."""
        now = self.clock()
        current = now - now % BUCKET_SECONDS
        with self._lock:
            items = [
                (
                    key,
                    stats.count,
                    sorted(stats.durations),
                    dict(stats.statuses),
                    [tuple(b) for b in list(stats.buckets)],  # list(): copied in one step
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
