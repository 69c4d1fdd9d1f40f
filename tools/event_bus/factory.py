"""Choosing the event bus backend from ``EVENT_BUS_URL``.

Kept apart from :mod:`tools.event_bus.backend` so the abstract seam never imports a concrete
broker: only this module knows that ``redis://`` means :class:`RedisStreamsBackend`, and Redis is
imported only when asked for.
"""

from __future__ import annotations

from .backend import EventBackend, InProcessBackend


def make_backend(url: str) -> EventBackend:
    """The backend ``EVENT_BUS_URL`` names: empty or ``memory://`` is the in-process one,
    ``redis://`` / ``rediss://`` Redis Streams (settings in :mod:`tools.event_bus.redis_settings`)."""
    url = url.strip()
    scheme = url.partition("://")[0].lower()
    if scheme in ("", "memory"):
        return InProcessBackend()
    if scheme in ("redis", "rediss"):
        from .redis_backend import RedisStreamsBackend
        from .redis_settings import RedisBusSettings

        return RedisStreamsBackend(RedisBusSettings.from_env(url))
    raise ValueError(
        f"EVENT_BUS_URL scheme {scheme!r} is not supported; leave it empty (or memory://) for the "
        "in-process bus, or use redis://host:6379/0 for Redis Streams"
    )
