"""Health a load balancer and an orchestrator can live with: liveness, readiness, and ``/system/health``.

- ``GET /system/health/live``: the process and its event loop answer. 200 ``{"status": "ok"}``,
  or 503 ``stalled`` while the event-loop watchdog has seen the loop held for more than
  ``LOOP_STALL_LIVENESS`` seconds within the last minute (restart me; while it is held, nothing
  answers at all); it says nothing about tools, so an outage elsewhere never restarts a process.
- ``GET /system/health/ready`` (and ``GET /system/health``, the same answer): whether this
  process should get traffic. 503 ``unavailable`` while it boots (a plugin is RUNNING), drains
  (SIGTERM received), or when a tool named in ``HEALTH_REQUIRED_TOOLS`` (comma separated) is not
  OK. Any other tool that is FAIL or DEAD makes it 200 ``degraded``: an upstream every instance
  shares (a model server, a database) going down must not empty the whole pool, because the
  endpoints that do not need it still work; so does a READY plugin whose background task crashed.
  200 ``ok`` otherwise.

A tool that is OFF (deliberately unconfigured) is not a problem unless it is required; a plugin
that is DEAD serves nothing and is listed under ``dead_plugins``. The endpoints are open (load
balancers carry no token), but once authentication is configured an anonymous caller gets the
statuses only: error messages, file paths and plugin errors need an admin token.
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin, Lifecycle, PluginStatus, ToolStatus
from core.settings import env_list

UNHEALTHY_TOOL = frozenset({ToolStatus.FAIL, ToolStatus.DEAD})


def required_tools(raw: str | None = None) -> frozenset[str]:
    """The tools named by ``HEALTH_REQUIRED_TOOLS`` (``raw`` overrides the environment)."""
    if raw is None:
        return frozenset(env_list("HEALTH_REQUIRED_TOOLS"))
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def assess(dump: dict[str, Any], required: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The readiness report of a system dump: ``status`` is ok, degraded or unavailable."""
    reasons: list[dict[str, Any]] = []
    degraded: list[dict[str, Any]] = []
    lifecycle = dump["kernel"].get("lifecycle", str(Lifecycle.SERVING))
    if lifecycle != Lifecycle.SERVING:
        message = "shutting down" if lifecycle == Lifecycle.DRAINING else "still booting"
        reasons.append({"process": lifecycle, "message": message})
    tools = dump["tools"]
    for name, tool in tools.items():
        entry = {"tool": name, "status": tool["status"], "message": tool["message"]}
        if tool.get("setup_error") and tool["setup_error"] != tool["message"]:
            entry["setup_error"] = tool["setup_error"]
        if name in required and tool["status"] != ToolStatus.OK:
            reasons.append({**entry, "required": True})
        elif tool["status"] in UNHEALTHY_TOOL:
            degraded.append(entry)
    for name in sorted(required - set(tools)):
        reasons.append({"tool": name, "status": None, "required": True, "message": "no such tool is loaded"})
    for plugin_id, plugin in dump["plugins"].items():
        if plugin["status"] == PluginStatus.RUNNING:
            reasons.append({"plugin": plugin_id, "status": plugin["status"], "message": "still booting"})
    dead_plugins = {
        plugin_id: plugin["error"]
        for plugin_id, plugin in dump["plugins"].items()
        if plugin["status"] == PluginStatus.DEAD
    }
    for plugin_id, plugin in dump["plugins"].items():
        if plugin.get("degraded") and plugin["status"] == PluginStatus.READY:
            degraded.append({"plugin": plugin_id, "status": "DEGRADED", "message": plugin["degraded"]})
    return {
        "status": "unavailable" if reasons else "degraded" if degraded else "ok",
        "reasons": reasons,
        "degraded": degraded,
        "dead_plugins": dead_plugins,
        "required_tools": sorted(required),
        "tools": {name: tool["status"] for name, tool in tools.items()},
    }


def statuses_only(report: dict[str, Any]) -> dict[str, Any]:
    """What an anonymous caller may see once auth is on: no messages, no paths, no errors."""
    return {
        "status": report["status"],
        "tools": report["tools"],
        "reasons": [
            {k: v for k, v in r.items() if k in ("tool", "plugin", "process", "status")}
            for r in report["reasons"]
        ],
        "degraded": [
            {k: v for k, v in d.items() if k in ("tool", "plugin", "status")} for d in report["degraded"]
        ],
        "dead_plugins": sorted(report["dead_plugins"]),
    }


class SystemHealthPlugin(BasePlugin):
    def __init__(self, http: Any, registry: Any) -> None:
        self.http = http
        self.registry = registry
        self.required = required_tools()

    def on_boot(self) -> None:
        self.http.add_endpoint("/system/health/live", "GET", self.live, tags=["system"])
        self.http.add_endpoint("/system/health/ready", "GET", self.ready, tags=["system"])
        self.http.add_endpoint("/system/health", "GET", self.ready, tags=["system"])

    async def live(self, data: dict[str, Any], context: dict[str, Any]) -> Any:
        """200 while the process and its event loop answer; 503 while the loop is stalled."""
        dump = self.registry.get_system_dump()
        loop = dump["kernel"].get("loop") or {}
        if loop.get("unhealthy"):
            body: dict[str, Any] = {"status": "stalled"}
            if await self.http.caller_is_admin(context):
                body["loop"] = loop
            return self.http.json_response(body, status_code=503)
        return {"status": "ok", "lifecycle": dump["kernel"].get("lifecycle")}

    async def ready(self, data: dict[str, Any], context: dict[str, Any]) -> Any:
        """200 ``ok`` or ``degraded`` when this process should get traffic, else 503 with the reasons."""
        report = assess(self.registry.get_system_dump(), self.required)
        if not await self.http.caller_is_admin(context):
            report = statuses_only(report)
        return self.http.json_response(report, status_code=503 if report["status"] == "unavailable" else 200)
