"""The live state of the service: tool and plugin statuses, recent calls, domain metadata.

Writers are the kernel, the ToolProxy and the health checker; readers are the system endpoints.
Readers only ever get snapshots (copies), never the live dictionaries, so nothing outside can
corrupt the state or observe it half-updated.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.watchdog import rss_bytes


def nearest_rank(ordered: list[float], percentile: float) -> float:
    """The ``percentile`` (0-100) of an ascending, non-empty list by the nearest-rank method: the
    smallest value with at least that share of the values at or below it. One definition for every
    percentile Keel reports (tool calls, routes), so their figures compare."""
    rank = max(1, math.ceil(percentile / 100 * len(ordered)))
    return ordered[rank - 1]


log = logging.getLogger("keel.registry")

METRICS_BUFFER_SIZE = 1000

MetricRecord = dict[str, Any]
MetricsSink = Callable[[MetricRecord], None]
CallRecord = tuple[str, str, float, bool, float]
"""How the ring buffer stores a call: (tool, method, duration_ms, success, timestamp).

A tuple is cheaper to build than a dict on every tool call; readers get dicts."""

RECORD_KEYS = ("tool", "method", "duration_ms", "success", "timestamp")


def _memory() -> dict[str, Any]:
    size = rss_bytes()
    return {"rss_mib": round(size / 2**20, 1) if size else None, "trend_mib_per_min": None}


def record_dict(record: CallRecord) -> MetricRecord:
    return dict(zip(RECORD_KEYS, record, strict=True))


class ToolStatus(StrEnum):
    OK = "OK"
    FAIL = "FAIL"
    DEAD = "DEAD"
    OFF = "OFF"


class Lifecycle(StrEnum):
    """Where the process is in its life: readiness answers 503 unless it is SERVING."""

    BOOTING = "BOOTING"
    SERVING = "SERVING"
    DRAINING = "DRAINING"


class PluginStatus(StrEnum):
    RUNNING = "RUNNING"
    READY = "READY"
    DEAD = "DEAD"


@dataclass(slots=True)  # no __dict__ each: boot builds one per plugin
class ToolState:
    status: ToolStatus
    message: str | None = None
    file: str | None = None
    since: float = field(default_factory=time.time)
    setup_failed: bool = False
    """DEAD because ``setup()`` failed: a later successful call does not mean the tool is set up,
    so only a passing health check (or an explicit OK) brings it back."""
    setup_error: str | None = None
    """Why ``setup()`` failed, kept (until the tool is OK again) when a health check overwrites
    ``message``: "connection refused" says more than "health_check() returned False"."""


@dataclass(slots=True)  # no __dict__ each: boot builds one per plugin
class PluginState:
    status: PluginStatus
    domain: str
    class_name: str
    dependencies: list[str]
    file: str | None = None
    error: str | None = None
    reload_error: str | None = None
    degraded: str | None = None
    """Why a READY plugin does not fully work (a background task of it crashed)."""


class Registry:
    """Tracks tools, plugins, load errors and the last ``METRICS_BUFFER_SIZE`` tool calls."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolState] = {}
        self._plugins: dict[str, PluginState] = {}
        self._load_errors: dict[str, str] = {}
        self._domain_metadata: dict[str, dict[str, Any]] = {}
        self._capabilities: dict[str, Any] = {}
        self.metrics: deque[CallRecord] = deque(maxlen=METRICS_BUFFER_SIZE)
        self.metrics_sinks: list[MetricsSink] = []
        self.started_at = time.time()
        self.lifecycle = Lifecycle.BOOTING
        self.watchdog: Any = None
        """The kernel's :class:`core.watchdog.LoopWatchdog` once it runs (loop stalls, memory)."""
        self.process = {"pid": os.getpid(), "host": socket.gethostname()}

    # -- tools ---------------------------------------------------------------------------------

    def register_tool(
        self,
        name: str,
        status: ToolStatus = ToolStatus.OK,
        message: str | None = None,
        file: str | None = None,
    ) -> None:
        self._tools[name] = ToolState(ToolStatus(status), message, file)

    def update_tool_status(
        self, name: str, status: ToolStatus | str, message: str | None = None, *, log_change: bool = True
    ) -> None:
        """Set a tool's status; a change is logged unless ``log_change`` is off (the caller logged the
        failure already: one line per failure)."""
        state = self._tools.get(name)
        if state is None:
            self._tools[name] = ToolState(ToolStatus(status), message)
            return
        new_status = ToolStatus(status)
        if new_status is ToolStatus.OK:
            state.setup_failed = False
            state.setup_error = None
        if new_status is not state.status:
            state.since = time.time()
        if new_status is not state.status and log_change:
            log.log(
                logging.WARNING if new_status in (ToolStatus.FAIL, ToolStatus.DEAD) else logging.INFO,
                "tool %s: %s -> %s%s",
                name,
                state.status,
                new_status,
                f" ({message})" if message else "",
            )
        state.status = new_status
        state.message = message

    def mark_setup_failed(self, name: str, reason: str, *, permanent: bool = True) -> None:
        """``setup()`` failed: DEAD with the reason, kept as ``setup_error``; ``permanent`` (a
        misconfiguration) means a later successful call does not bring it back, only a health check."""
        state = self._tools.get(name)
        if state is None or state.status is not ToolStatus.DEAD:
            log.error("tool %s is DEAD: %s", name, reason)  # one ERROR line, not a warning as well
        self.update_tool_status(name, ToolStatus.DEAD, reason, log_change=False)
        self._tools[name].setup_failed = permanent
        self._tools[name].setup_error = reason

    def tool_status(self, name: str) -> ToolStatus | None:
        state = self._tools.get(name)
        return state.status if state else None

    def tool_state(self, name: str) -> ToolState:
        """The live state of tool ``name``, registered OK first if it is not known yet.

        Not a snapshot: a tool's proxy keeps it, so every call reads the tool's status without a
        lookup and the proxy's health bookkeeping sees every change the registry makes."""
        state = self._tools.get(name)
        if state is None:
            self.register_tool(name)
            state = self._tools[name]
        return state

    def remove_tool(self, name: str) -> None:
        self._tools.pop(name, None)

    # -- plugins -------------------------------------------------------------------------------

    def register_plugin(
        self,
        plugin_id: str,
        *,
        domain: str,
        class_name: str,
        dependencies: list[str],
        file: str | None = None,
        status: PluginStatus = PluginStatus.RUNNING,
        error: str | None = None,
    ) -> None:
        self._plugins[plugin_id] = PluginState(status, domain, class_name, list(dependencies), file, error)

    def update_plugin_status(
        self, plugin_id: str, status: PluginStatus | str, error: str | None = None
    ) -> None:
        state = self._plugins[plugin_id]
        state.status = status if type(status) is PluginStatus else PluginStatus(status)  # boot is hot
        state.error = error

    def set_plugin_degraded(self, plugin_id: str, reason: str | None) -> None:
        if plugin_id in self._plugins:
            self._plugins[plugin_id].degraded = reason
            if reason:
                log.warning("plugin %s is degraded: %s", plugin_id, reason)

    def set_plugin_reload_error(self, plugin_id: str, error: str | None) -> None:
        if plugin_id in self._plugins:
            self._plugins[plugin_id].reload_error = error

    def remove_plugin(self, plugin_id: str) -> None:
        self._plugins.pop(plugin_id, None)

    def plugin_status(self, plugin_id: str) -> PluginStatus | None:
        state = self._plugins.get(plugin_id)
        return state.status if state else None

    def plugins_in_file(self, file: str) -> list[str]:
        """The ids of the plugins recorded as defined in ``file`` (relative to the root), sorted."""
        return sorted(plugin_id for plugin_id, state in self._plugins.items() if state.file == file)

    # -- files that could not be loaded --------------------------------------------------------

    def record_load_error(self, file: str, error: str) -> None:
        self._load_errors[file] = error

    def clear_load_error(self, file: str) -> None:
        self._load_errors.pop(file, None)

    def has_load_error(self, file: str) -> bool:
        return file in self._load_errors

    def files_under(self, folder: str) -> set[str]:
        """The files (relative to the root) below ``folder`` that a plugin or a load error names:
        what a live reload must look at when a whole folder was moved or deleted."""
        prefix = folder.rstrip(os.sep) + os.sep
        named = {state.file for state in self._plugins.values() if state.file} | set(self._load_errors)
        return {file for file in named if file.startswith(prefix)}

    # -- domains and kernel capabilities ------------------------------------------------------

    def set_domain_metadata(self, domain: str, key: str, value: Any) -> None:
        self._domain_metadata.setdefault(domain, {})[key] = value

    def get_domain_metadata(self) -> dict[str, dict[str, Any]]:
        return copy.deepcopy(self._domain_metadata)

    def set_capability(self, name: str, value: Any) -> None:
        """Record a kernel capability (the plugin watcher, say) so the dump reports it."""
        self._capabilities[name] = value

    # -- metrics -------------------------------------------------------------------------------

    def add_metrics_sink(self, sink: MetricsSink) -> None:
        self.metrics_sinks.append(sink)

    def remove_metrics_sink(self, sink: MetricsSink) -> None:
        if sink in self.metrics_sinks:
            self.metrics_sinks.remove(sink)

    def emit_to_sinks(self, record: MetricRecord) -> None:
        """Call every sink synchronously; a sink that raises is logged and never breaks the call."""
        for sink in tuple(self.metrics_sinks):
            try:
                sink(record)
            except Exception:
                log.exception("metrics sink %r raised; the tool call is unaffected", sink)

    def get_metrics(self) -> list[MetricRecord]:
        """The recent calls, oldest first, each ``{tool, method, duration_ms, success, timestamp}``."""
        return [record_dict(record) for record in tuple(self.metrics)]

    def counts(self) -> dict[str, int]:
        """How many tools, plugins, DEAD plugins and failed files there are, without a dump."""
        return {
            "tools": len(self._tools),
            "plugins": len(self._plugins),
            "dead_plugins": sum(p.status is PluginStatus.DEAD for p in self._plugins.values()),
            "load_errors": len(self._load_errors),
        }

    # -- the system dump -----------------------------------------------------------------------

    def get_system_dump(self) -> dict[str, Any]:
        """A deep snapshot of everything above, safe to serialise and to keep."""
        tools = {
            name: {
                "status": str(s.status),
                "message": s.message,
                "file": s.file,
                "since": s.since,
                "setup_error": s.setup_error,
            }
            for name, s in sorted(self._tools.items())
        }
        plugins: dict[str, Any] = {}
        domains: dict[str, dict[str, Any]] = {}
        for plugin_id, p in sorted(self._plugins.items()):
            plugins[plugin_id] = {
                "status": str(p.status),
                "error": p.error,
                "domain": p.domain,
                "class": p.class_name,
                "dependencies": list(p.dependencies),
                "file": p.file,
                "reload_error": p.reload_error,
                "degraded": p.degraded,
            }
            domains.setdefault(p.domain, {"plugins": []})["plugins"].append(plugin_id)
        for domain, metadata in self._domain_metadata.items():
            domains.setdefault(domain, {"plugins": []}).update(copy.deepcopy(metadata))
        return {
            "tools": tools,
            "plugins": plugins,
            "domains": dict(sorted(domains.items())),
            "load_errors": dict(sorted(self._load_errors.items())),
            "kernel": {
                "process": dict(self.process),
                "started_at": self.started_at,
                "lifecycle": str(self.lifecycle),
                "loop": self.watchdog.report() if self.watchdog is not None else None,
                "memory": self.watchdog.memory() if self.watchdog is not None else _memory(),
                "uptime_s": round(time.time() - self.started_at, 3),
                "per_process": ["metrics", "logs"],
                "capabilities": copy.deepcopy(self._capabilities),
            },
        }
