"""The middlewares that shape an Invoker's calls.

Each is a factory returning a ``Middleware`` (an async generator over ``(call, nxt)``), wired into
``Invoker(chat_middleware=[...], tool_middleware=[...])`` in the order they should run, first
outermost: ``retry`` (transient pre-stream failures), ``meter`` (guard and charge the run's meters),
``memoize`` / ``idempotent`` / ``semantic_memoize`` (reuse results; each needs a store or vector
index, else it steps aside), ``tracing`` (spans) and ``fallback`` (another model after a permanent
failure), ``output_coerce`` (typed partials and the parsed answer on a chat stream) and ``compaction``
(shrink the transcript with a ``Compactor``). A middleware
can also be written as a class: subclass ``BaseMiddleware`` and override its hooks.
"""

from core.policies.base import BaseMiddleware
from core.policies.coercion import output_coerce
from core.policies.compaction import compaction
from core.policies.fallbacks import fallback
from core.policies.memoizing import chat_cache_key, idempotency_key, idempotent, memoize
from core.policies.metering import meter
from core.policies.retrying import retry
from core.policies.semantic_cache import semantic_memoize
from core.policies.spans import tracing

__all__ = [
    "BaseMiddleware",
    "chat_cache_key",
    "compaction",
    "fallback",
    "idempotency_key",
    "idempotent",
    "memoize",
    "meter",
    "output_coerce",
    "retry",
    "semantic_memoize",
    "tracing",
]
