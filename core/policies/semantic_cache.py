"""``semantic_memoize()``: answer a question from a near-duplicate one asked before.

The cache is a ``VectorPort`` (the one passed in, else ``ctx.vector``; with neither it steps aside,
the same trap as ``memoize()``). Only self-contained questions are cached: a request whose transcript
is system messages plus exactly one user message. Anything with earlier turns or tool results
depends on more than its wording, so it passes through.

The question (the user message) is searched in the run's scope, restricted to entries made for the
same model and the same surroundings (system prompt, offered tools, response format, temperature
and max tokens, compared by ``stable_hash``). A hit scoring at least ``threshold`` replays the
stored answer as one delta with empty usage and sets ``call.meta["cache_hit"]``. On a miss the call
runs and, if it finished without asking for tools, its answer is stored as a chunk whose text is
the question and whose metadata carries the encoded result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.ports import Chunk, VectorPort
from core.contracts.types import ChatRequest, Delta, Role, assemble_deltas
from core.policies._codec import decode_delta, encode_result
from core.serialization import stable_hash, thaw

__all__ = ["semantic_memoize"]

_KIND = "semantic_memo"


def _question(request: ChatRequest) -> str | None:
    users = [m for m in request.messages if m.role == Role.USER]
    others = [m for m in request.messages if m.role not in (Role.USER, Role.SYSTEM)]
    if len(users) != 1 or others:
        return None
    return users[0].content


def _context_key(request: ChatRequest) -> str:
    """Everything besides the question that shapes the answer: system prompt, tools, format, settings."""
    return stable_hash(
        {
            "system": [m.content for m in request.messages if m.role == Role.SYSTEM],
            "tools": sorted(tool.name for tool in request.tools) if request.tools is not None else None,
            "response_format": thaw(request.response_format),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
    )


def semantic_memoize(vector: VectorPort | None = None, *, threshold: float = 0.9) -> Middleware:
    """Serve near-duplicate questions from ``vector`` (or ``ctx.vector``) when they score ``threshold``+."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")

    async def semantic_memoize_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        index = vector if vector is not None else getattr(call.ctx, "vector", None)
        request = call.request
        question = _question(request) if isinstance(request, ChatRequest) else None
        if index is None or question is None or not isinstance(request, ChatRequest):
            async for item in nxt(call):
                yield item
            return
        scope = call.ctx.scope
        where = {"kind": _KIND, "model": request.model, "context": _context_key(request)}
        hits = await index.search(question, 1, scope=scope, where=where)
        if hits and hits[0].score >= threshold:
            call.meta["cache_hit"] = True
            yield decode_delta(hits[0].chunk.metadata["result"])
            return
        live: list[Delta] = []
        async for delta in nxt(call):
            live.append(delta)
            yield delta
        result = assemble_deltas(live)
        if not result.tool_calls:
            chunk_id = stable_hash({"where": where, "question": question})
            chunk = Chunk(chunk_id, question, {**where, "result": encode_result(result)})
            await index.upsert([chunk], scope=scope)

    return semantic_memoize_middleware
