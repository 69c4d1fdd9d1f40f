"""``GET /system/cluster``: every live Keel process of this deployment, as any one of them sees it.

The answer is ``{"enabled", "self", "processes", "mismatched_plugin_files"}``: ``processes`` is each
live process's announcement (id, host, pid, version, start and heartbeat times, tool and plugin
statuses, headline figures, and a short hash of each plugin file), this process first;
``mismatched_plugin_files`` names the plugin files whose code differs between processes, with the
processes running each version. With one process (no shared Redis) ``enabled`` is false and the
list holds this process alone. The other processes' details stay on their own ``/system/status``.
Admin-only once authentication is configured; absent (404) in a project without the ``cluster`` tool.
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin


class SystemClusterPlugin(BasePlugin):
    def __init__(self, http: Any, cluster: Any = None) -> None:
        self.http = http
        self.cluster = cluster

    def on_boot(self) -> None:
        if self.cluster is None:
            return  # a project without the cluster tool: no endpoint (404), nothing to list
        self.http.add_endpoint("/system/cluster", "GET", self.members, tags=["system"], auth="admin")

    async def members(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Every live process, this one first, and the plugin files whose versions differ."""
        processes = await self.cluster.members()
        return {
            "enabled": self.cluster.enabled,
            "self": self.cluster.process_id,
            "processes": processes,
            "mismatched_plugin_files": self.cluster.version_mismatches(processes),
        }
