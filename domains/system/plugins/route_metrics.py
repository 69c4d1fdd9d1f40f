"""``GET /system/metrics/routes``: per route and method, the requests this process served.

Each entry is ``{"method", "path", "count", "rate_per_s", "p50_ms", "p95_ms", "p99_ms",
"statuses", "errors", "server_errors", "series", "bucket_seconds"}``: ``path`` is the route's
template (``/items/{id}``), ``rate_per_s`` is over the last minute, ``statuses`` counts responses by
status code, and ``series`` is the request count of each of the last ``bucket_seconds``-long
buckets, oldest first (the dashboard's sparklines). The http tool keeps these bounded per route
(:mod:`tools.http.route_metrics`). Per process, like ``/system/metrics``; admin-only once
authentication is configured.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from core import BasePlugin


class SystemRouteMetricsPlugin(BasePlugin):
    def __init__(self, http: Any) -> None:
        self.http = http
        self.process = {"pid": os.getpid(), "host": socket.gethostname()}

    def on_boot(self) -> None:
        self.http.add_endpoint("/system/metrics/routes", "GET", self.routes, tags=["system"], auth="admin")

    async def routes(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Requests, rate, latency percentiles and statuses per route and method (this process)."""
        return {"routes": self.http.get_route_metrics(), "per_process": True, "process": self.process}
