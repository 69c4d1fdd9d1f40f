"""``memoize()`` and ``idempotent()``: reuse a result instead of repeating the work.

Both need a ``StorePort``: the one passed in, else ``ctx.store``. With neither they step aside and
the call runs as if they were not there, with no warning. That is deliberate (a run without a store
still works) and it is a trap for tests: a test of caching must wire a store and assert on the
provider's call count, because the output is identical either way.

``memoize()`` caches chat results. The key is ``stable_hash`` of everything in the request that can
change the answer: the model, the transcript (each turn's role, content, name, tool-call id and tool
calls), the offered tool names, the response format, temperature and max tokens. Keys live in the
run's scope, so two tenants never share an entry. A miss runs the call through ``get_or_set`` (one
producer per key at a time; a producer that fails stores nothing), then replays the live deltas; a
hit replays the stored answer as one delta with empty usage (see ``core.policies._codec``) and sets
``call.meta["cache_hit"]``. A store that is down (``StoreUnavailable``) is logged and the call is
answered uncached: a cache outage must not fail a run. Tool calls pass through ``memoize()``.

``idempotent()`` is the tool-side counterpart, for tools that must not run twice for the same
request (an at-least-once retry must not send the email again). The key is ``stable_hash`` of the
tool name and its arguments, in the run's scope; the first successful result is stored and returned
for every repeat, and a failure is never stored. A store that is down is *not* stepped around here:
without it a repeat could run twice, so ``StoreUnavailable`` propagates. Chat calls pass through.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from core.contracts.errors import StoreUnavailable
from core.contracts.middleware import Call, Handler, Middleware, collect_one
from core.contracts.ports import StorePort
from core.contracts.types import ChatRequest, Delta, ToolRequest, assemble_deltas
from core.policies._codec import decode_delta, encode_result, message_identity
from core.serialization import stable_hash, thaw

__all__ = ["chat_cache_key", "idempotency_key", "idempotent", "memoize"]

_log = logging.getLogger(__name__)


def _store_for(call: Call, store: StorePort | None) -> StorePort | None:
    return store if store is not None else getattr(call.ctx, "store", None)


def chat_cache_key(request: ChatRequest) -> str:
    """The memo key of a chat request: every field that can change its answer."""
    return "memo:" + stable_hash(
        {
            "model": request.model,
            "messages": [message_identity(m) for m in request.messages],
            "tools": sorted(tool.name for tool in request.tools) if request.tools is not None else None,
            "response_format": thaw(request.response_format),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
    )


def idempotency_key(request: ToolRequest) -> str:
    """The idempotency key of a tool request: its name and arguments."""
    return "idem:" + stable_hash({"tool": request.name, "arguments": thaw(request.arguments)})


def memoize(store: StorePort | None = None, *, ttl: float | None = None) -> Middleware:
    """Cache chat results in ``store`` (or ``ctx.store``); a pass-through when there is neither."""

    async def memoize_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        target = _store_for(call, store)
        request = call.request
        if target is None or not isinstance(request, ChatRequest):
            async for item in nxt(call):
                yield item
            return
        live: list[Delta] = []
        progress = {"started": False, "done": False}

        async def produce() -> dict[str, Any]:
            progress["started"] = True
            live.extend([delta async for delta in nxt(call)])
            progress["done"] = True
            return encode_result(assemble_deltas(live))

        entry: dict[str, Any] | None
        try:
            entry = await target.get_or_set(chat_cache_key(request), produce, ttl=ttl, scope=call.ctx.scope)
        except StoreUnavailable:
            if progress["started"] and not progress["done"]:
                raise  # the call itself failed; that is not a cache outage
            # A cache outage must not fail the run: answer uncached, reusing the answer when the
            # producer finished before the store failed to keep it.
            _log.warning("memoize: the store is unavailable; answering without the cache", exc_info=True)
            if not progress["done"]:
                live.extend([delta async for delta in nxt(call)])
            entry = None
        if progress["done"] or entry is None:
            for delta in live:
                yield delta
            return
        call.meta["cache_hit"] = True
        yield decode_delta(entry)

    return memoize_middleware


def idempotent(store: StorePort | None = None, *, ttl: float | None = None) -> Middleware:
    """Run each distinct tool request once per scope; repeats get the stored result."""

    async def idempotent_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        target = _store_for(call, store)
        request = call.request
        if target is None or not isinstance(request, ToolRequest):
            async for item in nxt(call):
                yield item
            return
        ran = False

        async def produce() -> Any:
            nonlocal ran
            ran = True
            return await collect_one(nxt(call))

        result = await target.get_or_set(idempotency_key(request), produce, ttl=ttl, scope=call.ctx.scope)
        if not ran:
            call.meta["idempotent_replay"] = True
        yield result

    return idempotent_middleware
