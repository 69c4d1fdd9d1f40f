"""``GET /system/health``: 200 when the service can take traffic, 503 with the reasons when not.

Unhealthy means: a tool is FAIL or DEAD, or a plugin is still booting (RUNNING). A tool that is
OFF (deliberately unconfigured) and a plugin that is DEAD (it failed to boot and serves nothing)
do not make the service unhealthy — a load balancer could do nothing about them — but DEAD
plugins are listed under ``dead_plugins`` so they are never silent. The endpoint is open (load
balancers carry no token).
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin, PluginStatus, ToolStatus

UNHEALTHY_TOOL = frozenset({ToolStatus.FAIL, ToolStatus.DEAD})


def assess(dump: dict[str, Any]) -> dict[str, Any]:
    """The health report of a system dump."""
    reasons: list[dict[str, Any]] = []
    for name, tool in dump["tools"].items():
        if tool["status"] in UNHEALTHY_TOOL:
            reasons.append({"tool": name, "status": tool["status"], "message": tool["message"]})
    for plugin_id, plugin in dump["plugins"].items():
        if plugin["status"] == PluginStatus.RUNNING:
            reasons.append({"plugin": plugin_id, "status": plugin["status"], "message": "still booting"})
    dead_plugins = {
        plugin_id: plugin["error"]
        for plugin_id, plugin in dump["plugins"].items()
        if plugin["status"] == PluginStatus.DEAD
    }
    return {
        "status": "unavailable" if reasons else "ok",
        "reasons": reasons,
        "dead_plugins": dead_plugins,
        "tools": {name: tool["status"] for name, tool in dump["tools"].items()},
    }


class SystemHealthPlugin(BasePlugin):
    def __init__(self, http: Any, registry: Any) -> None:
        self.http = http
        self.registry = registry

    def on_boot(self) -> None:
        self.http.add_endpoint("/system/health", "GET", self.health, tags=["system"])

    async def health(self, data: dict[str, Any], context: dict[str, Any]) -> Any:
        """200 ``{"status": "ok"}`` when healthy, else 503 with the reasons."""
        report = assess(self.registry.get_system_dump())
        return self.http.json_response(report, status_code=503 if report["reasons"] else 200)
