"""The settings of the Redis Streams backend, read from the environment once, at ``setup()``.

==================================  ============  ===============================================
``EVENT_BUS_URL``                   (empty)       ``redis://host:6379/0`` (or ``rediss://``) turns
                                                  the backend on
``EVENT_BUS_PREFIX``                ``keel:events:``  every key the bus writes starts with it
``EVENT_BUS_CLAIM_IDLE_MS``         30000         an entry a consumer has held this long without
                                                  acknowledging it is claimed by another process
``EVENT_BUS_MAX_ATTEMPTS``          5             handler runs per entry before it is dead-lettered
``EVENT_BUS_RETRY_BACKOFF_MS``      200           the wait before the first retry; doubled each
                                                  time, at most ``MAX_BACKOFF_MS``
``EVENT_BUS_STREAM_MAXLEN``         100000        entries kept per event name: beyond it the
                                                  oldest are trimmed, but only once every group
                                                  has acknowledged them; ``0`` keeps every entry
``EVENT_BUS_STREAM_HARD_MAXLEN``    10 x MAXLEN   the cap that does drop unacknowledged entries
                                                  (counted, logged, in the dump); ``0`` = none
``EVENT_BUS_DEDUP_TTL_SECONDS``     86400         how long a group remembers the event ids it
                                                  handled, to skip redeliveries; ``0`` = off
``EVENT_BUS_CONCURRENCY``           256           deliveries running at once in this process
``EVENT_BUS_CONNECT_TIMEOUT``       5             seconds to reach Redis
==================================  ============  ===============================================

A malformed value is a ``ValueError`` naming the variable: the tool's setup fails with it (DEAD,
saying why) instead of running with a setting nobody asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import env_float, env_int, env_str

MAX_BACKOFF_MS = 10_000


@dataclass(frozen=True)
class RedisBusSettings:
    url: str
    prefix: str = "keel:events:"
    claim_idle_ms: int = 30_000
    max_attempts: int = 5
    retry_backoff_ms: int = 200
    stream_maxlen: int = 100_000
    concurrency: int = 256
    connect_timeout: float = 5.0
    stream_hard_maxlen: int = 1_000_000
    dedup_ttl_seconds: int = 86_400

    @classmethod
    def from_env(cls, url: str) -> RedisBusSettings:
        prefix = env_str("EVENT_BUS_PREFIX", cls.prefix)
        maxlen = env_int("EVENT_BUS_STREAM_MAXLEN", cls.stream_maxlen, minimum=0)
        hard = env_int("EVENT_BUS_STREAM_HARD_MAXLEN", 10 * maxlen, minimum=0)
        if hard and hard < maxlen:
            raise ValueError(
                f"EVENT_BUS_STREAM_HARD_MAXLEN ({hard}) must be 0 or at least "
                f"EVENT_BUS_STREAM_MAXLEN ({maxlen})"
            )
        return cls(
            url=url,
            prefix=prefix,
            claim_idle_ms=env_int("EVENT_BUS_CLAIM_IDLE_MS", cls.claim_idle_ms, minimum=10),
            max_attempts=env_int("EVENT_BUS_MAX_ATTEMPTS", cls.max_attempts, minimum=1),
            retry_backoff_ms=env_int("EVENT_BUS_RETRY_BACKOFF_MS", cls.retry_backoff_ms, minimum=0),
            stream_maxlen=maxlen,
            stream_hard_maxlen=hard,
            dedup_ttl_seconds=env_int("EVENT_BUS_DEDUP_TTL_SECONDS", cls.dedup_ttl_seconds, minimum=0),
            concurrency=env_int("EVENT_BUS_CONCURRENCY", cls.concurrency, minimum=1),
            connect_timeout=env_float("EVENT_BUS_CONNECT_TIMEOUT", cls.connect_timeout)
            or cls.connect_timeout,
        )

    def backoff_seconds(self, failed_attempts: int) -> float:
        """How long to wait after the ``failed_attempts``-th failure before running the handler again."""
        delay_ms = self.retry_backoff_ms * 2.0 ** (failed_attempts - 1)
        return min(delay_ms, MAX_BACKOFF_MS) / 1000
