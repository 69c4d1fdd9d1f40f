"""``compaction(compactor)``: shrink a chat request's transcript before it is sent.

On each chat call the compactor is asked for a transcript standing in for ``call.request.messages``;
when it returns a different one, ``call.request`` is replaced with a copy carrying it (the request
itself is never edited), so every middleware after this one, and the model, see the compacted
transcript. A compactor owns its own threshold and returns a short transcript unchanged; in that
case the request is left as it was. Tool calls pass through. ``call.meta["compacted"]`` records how
many messages were removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import ChatRequest

__all__ = ["compaction"]


def compaction(compactor: Any) -> Middleware:
    """Compact each chat request's transcript with ``compactor`` (a ``Compactor``)."""
    if not callable(getattr(compactor, "compact", None)):
        raise TypeError(f"compaction needs a Compactor (with compact(messages, ctx)), got {compactor!r}")

    async def compaction_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        request = call.request
        if call.kind == "chat" and isinstance(request, ChatRequest):
            messages = list(await compactor.compact(request.messages, call.ctx))
            if messages != list(request.messages):
                call.meta["compacted"] = len(request.messages) - len(messages)
                call.request = dataclasses.replace(request, messages=messages)
        async for item in nxt(call):
            yield item

    return compaction_middleware
