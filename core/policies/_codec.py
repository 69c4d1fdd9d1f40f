"""How a chat result is written to a store and replayed from it.

A cache entry is a JSON document (so any ``StorePort`` backend can hold it): the content, the tool
calls as plain dicts, the finish reason, model, provider and the original usage. Replaying one
yields a single ``Delta`` with an empty ``Usage``: a cache hit consumed nothing, so a ``meter()``
outside the cache charges nothing for it (it still counts the call). ``parsed`` is not stored: it
holds an object the store may not be able to encode, and a caller re-parses the content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.contracts.types import Delta, LLMResult, ToolCall
from core.serialization import thaw

__all__ = ["decode_delta", "encode_result", "message_identity"]


def encode_result(result: LLMResult) -> dict[str, Any]:
    usage = result.usage
    return {
        "content": result.content,
        "tool_calls": [
            {"id": call.id, "name": call.name, "arguments": thaw(call.arguments)}
            for call in result.tool_calls
        ],
        "finish_reason": result.finish_reason,
        "model": result.model,
        "provider": result.provider,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "cost_usd": usage.cost_usd,
        },
    }


def decode_delta(entry: Mapping[str, Any]) -> Delta:
    return Delta(
        text=entry.get("content", ""),
        tool_calls=tuple(
            ToolCall(call["id"], call["name"], call.get("arguments", {}))
            for call in entry.get("tool_calls", ())
        ),
        finish_reason=entry.get("finish_reason"),
        model=entry.get("model"),
        provider=entry.get("provider"),
    )


def message_identity(message: Any) -> dict[str, Any]:
    """Every field of a transcript turn that can change the next answer, as plain data."""
    return {
        "role": str(message.role),
        "content": message.content,
        "name": message.name,
        "tool_call_id": message.tool_call_id,
        "tool_calls": [
            {"id": call.id, "name": call.name, "arguments": thaw(call.arguments)}
            for call in message.tool_calls
        ],
    }
