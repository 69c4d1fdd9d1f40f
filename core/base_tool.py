"""What a tool is: one external system or cross-cutting concern, injected into plugins by name.

A tool is constructed with no arguments, then the kernel binds it to the project root and the
registry, then calls ``setup()``. Everything else is optional and discovered by name:

- ``async health_check() -> bool``: polled by the system domain's health plugin.
- ``async on_instrument(tracer_provider)``: called by telemetry on the raw instance.
- ``async serve(stop: asyncio.Event)``: a long-running duty (the HTTP server); the kernel runs it
  after boot and sets ``stop`` on SIGINT/SIGTERM. It returns once in-flight work has drained.
- ``release_owner(owner)``: forget everything registered by a plugin (``<domain>.<Class>``),
  called when that plugin is unloaded, so an unload leaves nothing behind.
- ``promote_owner(staged, owner)``, ``async drain_owner(owner)``, ``async
  on_plugins_changed(container)``: the live-reload hooks, described in :mod:`core.reloader`.
- ``async apply_pending_migrations() -> dict``: apply migrations changed while the service runs
  (the db tool); the live-reload hook described in :mod:`core.reload_sources`.
- ``loop_factory``: a class attribute naming a faster event loop (uvloop) the kernel may use.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import asyncio

    from core.container import Container
    from core.registry import Registry


class BaseTool:
    """Subclass it under ``tools/<name>/`` and give the class a unique ``name``."""

    name: ClassVar[str] = ""
    loop_factory: ClassVar[Callable[[], asyncio.AbstractEventLoop] | None] = None

    project_root: Path
    kernel_registry: Registry

    def bind(self, *, project_root: Path, registry: Registry) -> None:
        """Called by the kernel before ``setup()``: where the project lives, and its registry."""
        self.project_root = project_root
        self.kernel_registry = registry

    async def setup(self) -> None:
        """Connect, read configuration, raise ``ToolNotConfiguredError`` to be OFF."""

    async def on_boot_complete(self, container: Container) -> None:
        """Every plugin has booted; the server is about to start."""

    async def shutdown(self) -> None:
        """Release what ``setup()`` acquired (flush, close pools). Called in reverse order."""

    def get_interface_description(self) -> str:
        """A stable, human-readable summary of the public methods (signature and first doc line)."""
        lines = [f"{self.name}: {_first_line(type(self).__doc__)}".rstrip(": ")]
        for attr in sorted(dir(type(self))):
            if attr.startswith("_") or attr in _LIFECYCLE:
                continue
            member = getattr(type(self), attr)
            if not inspect.isfunction(member):
                continue
            signature = str(inspect.signature(member)).replace("(self, ", "(").replace("(self)", "()")
            lines.append(f"  - {attr}{signature}: {_first_line(member.__doc__)}".rstrip(": "))
        return "\n".join(lines)


_LIFECYCLE = frozenset(
    {
        "bind",
        "setup",
        "shutdown",
        "on_boot_complete",
        "on_instrument",
        "serve",
        "release_owner",
        "promote_owner",
        "drain_owner",
        "on_plugins_changed",
        "apply_pending_migrations",
        "get_interface_description",
        "health_check",
    }
)


def _first_line(doc: str | None) -> str:
    return (inspect.cleandoc(doc).splitlines() or [""])[0] if doc else ""


def tool_methods(tool: Any) -> list[str]:
    """The public method names of a tool, as the proxy wraps them."""
    return [n for n in dir(tool) if not n.startswith("_") and inspect.ismethod(getattr(tool, n, None))]
