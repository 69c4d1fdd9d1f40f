"""``GET /system/status``: the system dump — every tool, plugin and domain with its status and error.

It exposes internals (file paths, error messages), so it asks for an admin token once
authentication is configured (see the http tool's ``auth="admin"``).
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin


class SystemStatusPlugin(BasePlugin):
    def __init__(self, http: Any, registry: Any) -> None:
        self.http = http
        self.registry = registry

    def on_boot(self) -> None:
        self.http.add_endpoint("/system/status", "GET", self.status, tags=["system"], auth="admin")

    async def status(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The system dump: tools, plugins, domains, load errors and the kernel process."""
        dump: dict[str, Any] = self.registry.get_system_dump()
        return dump
