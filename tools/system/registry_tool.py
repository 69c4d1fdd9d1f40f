"""The ``registry`` tool: what plugins may read and change of the kernel's registry.

It is a thin, owner-aware face of ``core.registry.Registry``: snapshots of the system dump and the
recent tool calls, per ``tool.method`` aggregates of those calls, tool status updates (for health
checkers), domain metadata, and metrics sinks that are removed when the plugin that added them is
unloaded (``release_owner``).

``get_metrics_summary`` aggregates the calls still in the ring buffer (the last 1000, per process):
for each ``"tool.method"``, ``count``, ``errors`` and the 50th/95th/99th percentile durations in
milliseconds (nearest-rank: the smallest recorded duration with at least that share of calls at
or below it).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from typing import Any

from core.base_tool import BaseTool
from core.context import current_plugin_var
from core.registry import MetricRecord, MetricsSink, ToolStatus, nearest_rank

PERCENTILES = (50, 95, 99)


def summarize(records: Iterable[MetricRecord]) -> dict[str, dict[str, Any]]:
    """Per ``"tool.method"``: count, errors, p50_ms, p95_ms, p99_ms (sorted by key)."""
    durations: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    for record in records:
        key = f"{record['tool']}.{record['method']}"
        durations.setdefault(key, []).append(float(record["duration_ms"]))
        errors[key] = errors.get(key, 0) + (0 if record["success"] else 1)
    summary: dict[str, dict[str, Any]] = {}
    for key in sorted(durations):
        ordered = sorted(durations[key])
        entry: dict[str, Any] = {"count": len(ordered), "errors": errors[key]}
        for percentile in PERCENTILES:
            entry[f"p{percentile}_ms"] = nearest_rank(ordered, percentile)
        summary[key] = entry
    return summary


class RegistryTool(BaseTool):
    """The system's live state: dump, tool-call metrics and their aggregates, tool statuses."""

    name = "registry"

    def __init__(self) -> None:
        self._sinks: list[tuple[MetricsSink, str | None]] = []
        self._lock = threading.Lock()

    def get_system_dump(self) -> dict[str, Any]:
        """A snapshot of tools, plugins, domains, load errors and the kernel process."""
        return self.kernel_registry.get_system_dump()

    def get_metrics(self) -> list[MetricRecord]:
        """The recent tool calls, oldest first: tool, method, duration_ms, success, timestamp."""
        return self.kernel_registry.get_metrics()

    def get_metrics_summary(self) -> dict[str, dict[str, Any]]:
        """Per ``"tool.method"``: count, errors, p50_ms, p95_ms, p99_ms over the recent calls."""
        return summarize(self.kernel_registry.get_metrics())

    def get_tool_status(self, name: str) -> str | None:
        """The tool's status (OK, FAIL, DEAD, OFF), or ``None`` for an unknown tool."""
        status = self.kernel_registry.tool_status(name)
        return str(status) if status is not None else None

    def update_tool_status(self, name: str, status: ToolStatus | str, message: str | None = None) -> None:
        """Set a tool's status (OK, FAIL, DEAD, OFF) with a message saying why."""
        self.kernel_registry.update_tool_status(name, ToolStatus(status), message)

    def get_domain_metadata(self) -> dict[str, dict[str, Any]]:
        """A copy of every domain's metadata."""
        return self.kernel_registry.get_domain_metadata()

    def set_domain_metadata(self, domain: str, key: str, value: Any) -> None:
        """Record a copy of ``value`` under ``key`` for ``domain`` (shown in the dump's ``domains``)."""
        self.kernel_registry.set_domain_metadata(domain, key, copy.deepcopy(value))

    def add_metrics_sink(self, sink: MetricsSink) -> None:
        """Call ``sink(record)`` synchronously after every tool call; keep it fast."""
        if not callable(sink):
            raise TypeError(f"a metrics sink must be callable, got {sink!r}")
        with self._lock:
            self._sinks.append((sink, current_plugin_var.get()))
        self.kernel_registry.add_metrics_sink(sink)

    def remove_metrics_sink(self, sink: MetricsSink) -> None:
        """Stop calling ``sink`` (no error if it was not added)."""
        with self._lock:
            self._sinks = [entry for entry in self._sinks if entry[0] != sink]
        self.kernel_registry.remove_metrics_sink(sink)

    def release_owner(self, owner: str) -> None:
        with self._lock:
            released = [sink for sink, sink_owner in self._sinks if sink_owner == owner]
            self._sinks = [entry for entry in self._sinks if entry[1] != owner]
        for sink in released:
            self.kernel_registry.remove_metrics_sink(sink)
