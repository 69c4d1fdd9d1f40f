"""Context variables that carry "who is running" and "which event caused this" across tasks.

``contextvars`` are copied into every task and worker thread Keel starts, so a value set around a
plugin hook, an HTTP handler or an event subscriber follows everything that work spawns, and is
reset in a ``finally`` so it never leaks into the next piece of work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

current_event_id_var: ContextVar[str | None] = ContextVar("keel_current_event_id", default=None)
"""The id of the event (or HTTP request) being handled: the parent of anything published now."""

current_identity_var: ContextVar[str | None] = ContextVar("keel_current_identity", default=None)
"""``<domain>.<Class>.<method>`` of the plugin code running now; log lines are attributed to it."""

current_plugin_var: ContextVar[str | None] = ContextVar("keel_current_plugin", default=None)
"""``<domain>.<Class>`` of the plugin being constructed or booted: the owner of what it registers."""

IDENTITY_ATTRIBUTE = "keel_identity"
"""The attribute the kernel sets on every plugin instance: its ``<domain>.<Class>`` identity."""


@contextmanager
def bound(var: ContextVar[str | None], value: str | None) -> Iterator[None]:
    """Set ``var`` for the duration of a block and always reset it afterwards."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def identity_of(handler: Callable[..., Any]) -> str:
    """The identity a callable runs under: ``<domain>.<Class>.<method>`` for a plugin's bound method.

    Anything else (a function, a tool's method, a lambda) is named by its qualified name, so a log
    line is always attributed to something a reader can find.
    """
    owner = getattr(handler, "__self__", None)
    name = getattr(handler, "__name__", type(handler).__name__)
    plugin_identity = getattr(owner, IDENTITY_ATTRIBUTE, None) if owner is not None else None
    if isinstance(plugin_identity, str):
        return f"{plugin_identity}.{name}"
    return str(getattr(handler, "__qualname__", name))
