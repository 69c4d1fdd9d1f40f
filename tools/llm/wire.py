"""Keel's chat values in OpenAI's chat-completions JSON, and the server's usage back in Keel's.

Request rules:

* Messages keep their role and content. An assistant turn that asked for tools sends them as
  ``tool_calls`` entries of type ``function`` whose ``arguments`` is the JSON text, and its content
  as ``null`` when it is empty (some servers refuse an empty string beside tool calls). A ``tool``
  turn sends ``tool_call_id``; ``name`` is sent on the other roles only, where the API defines it.
* ``tools=None`` sends no ``tools`` key at all (advertise nothing); an empty list is sent as is.
* ``response_format``, ``temperature`` and ``max_tokens`` are sent only when set. ``cache_hint`` is
  not sent: OpenAI-compatible servers cache prompt prefixes on their own.
* The body always streams and, unless ``LLM_STREAM_USAGE`` is off, asks for the final usage chunk.

Usage: OpenAI counts cached prompt tokens inside ``prompt_tokens``
(``prompt_tokens_details.cached_tokens``); Keel's ``Usage.input_tokens`` is the uncached part only,
so the cached tokens are moved to ``cache_read_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.contracts.types import ChatRequest, Message, Role, ToolSchema, Usage
from core.serialization import thaw

from .pricing import PriceTable


def request_body(request: ChatRequest, *, stream_usage: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [message_json(m) for m in request.messages],
        "stream": True,
    }
    if stream_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools is not None:
        body["tools"] = [tool_json(t) for t in request.tools]
    if request.response_format is not None:
        body["response_format"] = thaw(request.response_format)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    return body


def message_json(message: Message) -> dict[str, Any]:
    role = str(message.role)
    entry: dict[str, Any] = {"role": role, "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(thaw(call.arguments))},
            }
            for call in message.tool_calls
        ]
        if not message.content:
            entry["content"] = None
    if role == Role.TOOL:
        if message.tool_call_id is not None:
            entry["tool_call_id"] = message.tool_call_id
    elif message.name is not None:
        entry["name"] = message.name
    return entry


def tool_json(tool: ToolSchema) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": thaw(tool.parameters) or {"type": "object"}}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def usage_from(raw: Mapping[str, Any], model: str, prices: PriceTable) -> Usage:
    """Keel's ``Usage`` (with its cost) for the server's ``usage`` object."""
    prompt = _count(raw.get("prompt_tokens"))
    completion = _count(raw.get("completion_tokens"))
    details = raw.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    cached = min(cached, prompt)
    uncached = prompt - cached
    return Usage(
        input_tokens=uncached,
        output_tokens=completion,
        cache_read_tokens=cached,
        cost_usd=prices.cost(model, uncached, completion, cached),
    )


def error_detail(body: bytes) -> str:
    """The server's explanation of an error response, short enough for a log line."""
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return _clip(text)
    return _clip(error_message(parsed) or text)


def error_message(parsed: Any) -> str | None:
    """``error.message`` (or ``error`` itself, or ``message``) from an error object, if present."""
    if not isinstance(parsed, Mapping):
        return None
    error = parsed.get("error")
    if isinstance(error, Mapping):
        message = error.get("message")
        return str(message) if message else json.dumps(error)
    if isinstance(error, str):
        return error
    message = parsed.get("message")
    return str(message) if message else None


def last_user_text(messages: Sequence[Message]) -> str:
    return next((m.content for m in reversed(messages) if m.role == Role.USER), "")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
