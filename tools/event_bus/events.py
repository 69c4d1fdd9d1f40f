"""What travels on the bus (:class:`Event`) and who listens (:class:`Subscription`)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from core.context import IDENTITY_ATTRIBUTE, identity_of
from core.reloader import base_owner

Handler = Callable[["Event"], Awaitable[Any] | Any]
"""A subscriber: ``handler(event)``, plain or ``async``; its return value answers a request."""


class Event(NamedTuple):
    """One published event, as every subscriber receives it (immutable).

    ``payload`` is a deep-frozen JSON value; ``parent_id`` is the event (or HTTP request) being
    handled where this one was published, ``None`` for a root; ``emitter`` is the identity
    (``<domain>.<Class>.<method>``) that published it, when known. A named tuple rather than a
    frozen dataclass because one is built per publish and it is several times cheaper to build.
    """

    id: str
    name: str
    payload: Any
    parent_id: str | None
    emitter: str | None
    timestamp: float
    """Wall-clock time of ``publish``, seconds since the epoch."""


class Subscription:
    """One handler subscribed to one event name, with its group and its failure count for the dump.

    ``group`` matters where several processes share a broker: a group receives each event once
    across them (:mod:`tools.event_bus.redis_backend`). In one process every subscription simply
    receives every event of its name.
    """

    __slots__ = ("failed", "group", "handler", "identity", "is_async", "name", "owner")

    def __init__(self, name: str, handler: Handler, identity: str, owner: str | None, group: str) -> None:
        self.name = name
        self.handler = handler
        self.identity = identity
        self.owner = owner
        self.group = group
        self.is_async = _is_async(handler)
        self.failed = 0

    def snapshot(self) -> dict[str, Any]:
        return {
            "event": self.name,
            "subscriber": self.identity,
            "owner": self.owner,
            "group": self.group,
            "failed": self.failed,
        }


def default_group(owner: str | None, handler: Handler) -> str:
    """The group of a subscription made without ``group=``: the plugin that subscribes.

    That is the plugin booting (``owner``, without a reload's staging mark), else the plugin whose
    method the handler is, else the handler's qualified name.
    """
    plugin_id = base_owner(owner)
    if plugin_id:
        return plugin_id
    plugin = getattr(getattr(handler, "__self__", None), IDENTITY_ATTRIBUTE, None)
    if isinstance(plugin, str) and plugin:
        return plugin
    return identity_of(handler)


def _is_async(handler: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)
