"""``fallback(models=[...])``: when a model fails for good, ask the next one.

A chat call that fails before its first delta with an error ``classify`` calls ``permanent`` (a
model that does not exist, a request this provider refuses) is re-issued with the next model in
``models``: ``call.request`` is pointed at a copy of the request with the model swapped (the request
itself is immutable), and ``call.meta["fallback_model"]`` records the model that answered. Transient
failures are left to ``retry()`` (put it inside ``fallback`` in the chain); unknown ones propagate,
as does a failure after the stream started or on the last model. Tool calls pass through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from core.contracts.errors import ErrorClass
from core.contracts.errors import classify as default_classify
from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import ChatRequest

__all__ = ["fallback"]


def fallback(
    models: Sequence[str],
    *,
    classify: Callable[[BaseException], ErrorClass] = default_classify,
) -> Middleware:
    """Try ``models`` in order after the requested model fails permanently before streaming."""
    backups = tuple(models)
    if not backups:
        raise ValueError("fallback needs at least one model to fall back to")

    async def fallback_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        request = call.request
        if not isinstance(request, ChatRequest):
            async for item in nxt(call):
                yield item
            return
        candidates = [request.model, *(m for m in backups if m != request.model)]
        for position, model in enumerate(candidates):
            if position:
                current = call.request
                base = current if isinstance(current, ChatRequest) else request
                call.request = dataclasses.replace(base, model=model)
                call.meta["fallback_model"] = model
            started = False
            try:
                async for item in nxt(call):
                    started = True
                    yield item
                return
            except Exception as exc:
                last = position == len(candidates) - 1
                if started or last or classify(exc) is not ErrorClass.PERMANENT:
                    raise

    return fallback_middleware
