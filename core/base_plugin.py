"""What a plugin is: one feature in one file under ``domains/<domain>/plugins/``.

The kernel reads ``__init__``'s parameter names and injects the tool of each name. Two names are
reserved: ``container`` injects the Container itself, and ``tasks`` a per-plugin
:class:`~core.plugin_tasks.PluginTasks` whose background tasks are cancelled when the plugin is
unloaded or replaced. A parameter with a default may go unmatched. Hooks may be plain or
``async def``; plain ones run in a worker thread so they never block the event loop.
"""

from __future__ import annotations

from typing import Any


class BasePlugin:
    """Subclass it; the kernel identifies the instance as ``<domain>.<ClassName>``."""

    keel_identity: str = ""

    def on_boot(self) -> Any:
        """Register routes, subscribe to events. Bounded by ``PLUGIN_BOOT_TIMEOUT``."""
        return None

    def on_shutdown(self) -> Any:
        """Release what ``on_boot`` started. Called in reverse boot order."""
        return None
