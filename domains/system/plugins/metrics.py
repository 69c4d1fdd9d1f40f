"""``GET /system/metrics``: the recent tool calls and, per ``tool.method``, their aggregates.

``loop`` counts the event-loop stalls the watchdog saw (``core.watchdog``) and ``memory`` is the
process RSS with its trend. ``?limit=N`` (default 100, at most 1000) bounds the records returned,
newest last; ``?tool=NAME`` (repeatable) keeps those tools' calls (records and summary).
The numbers are per process: the ring buffer of the last 1000 calls lives in each Keel process,
and the response says which (``process``: ``{"pid", "host"}``, as in the dump's
``kernel.process``). Admin-only once authentication is configured.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from core import BasePlugin, InvalidInputError

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class SystemMetricsPlugin(BasePlugin):
    def __init__(self, http: Any, registry: Any) -> None:
        self.http = http
        self.registry = registry
        self.process = {"pid": os.getpid(), "host": socket.gethostname()}

    def on_boot(self) -> None:
        self.http.add_endpoint("/system/metrics", "GET", self.metrics, tags=["system"], auth="admin")

    async def metrics(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Recent tool calls (``records``) and per ``tool.method`` count, errors, p50/p95/p99 ms."""
        limit = _limit(data.get("limit"))
        tool = data.get("tool")
        records: list[dict[str, Any]] = self.registry.get_metrics()
        summary: dict[str, Any] = self.registry.get_metrics_summary()
        if tool is not None:
            tools = {tool} if isinstance(tool, str) else set(tool)
            records = [r for r in records if r["tool"] in tools]
            summary = {k: v for k, v in summary.items() if k.partition(".")[0] in tools}
        kernel = self.registry.get_system_dump()["kernel"]
        return {
            "loop": kernel.get("loop"),
            "memory": kernel.get("memory"),
            "records": records[-limit:] if limit else [],
            "summary": summary,
            "per_process": True,
            "process": self.process,
        }


def _limit(raw: object) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if isinstance(raw, str) and raw.isdigit() and int(raw) <= MAX_LIMIT:
        return int(raw)
    raise InvalidInputError(
        f"limit must be a whole number between 0 and {MAX_LIMIT}, got {raw!r}",
        fields=[{"field": "limit", "location": "query", "message": f"0 to {MAX_LIMIT}"}],
    )
