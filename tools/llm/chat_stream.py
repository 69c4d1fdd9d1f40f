"""A chat-completions stream's chunks, as Keel ``Delta`` s.

What is emitted, in order:

* a ``Delta(text=...)`` for every piece of content, as soon as it arrives;
* when a chunk carries a ``finish_reason``: one ``Delta`` with that reason and every tool call of
  the answer, whole (see :mod:`tools.llm.tool_calls` for how fragments are put together);
* when a chunk carries ``usage`` (the last chunk, with ``stream_options.include_usage``): a
  ``Delta(usage=...)`` whose cost comes from the price table.

Every delta carries the model the server named, the provider name and the response ``id`` the
server sent (``response_id``, once a chunk carried one). Chunks with no choices (the
usage chunk; some servers send ``"choices": null``) and role-only deltas are normal.

How it ends:

* ``data: [DONE]`` ends it. A stream that ended without a ``finish_reason`` still hands over the
  tool calls it collected, with ``tool_calls`` (or ``stop``) as the reason.
* The lines running out without ``[DONE]`` is fine once a finish reason arrived (the answer is
  whole; only the usage may be missing), and a broken connection otherwise (``connection``).
* A chunk that is not a JSON object is ``malformed_response``. An ``error`` object inside the
  stream (how servers report a failure after the status line was sent) is a ``server_error``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

from core.contracts.types import Delta, FinishReason

from .errors import LLMError, LLMErrorReason
from .pricing import PriceTable
from .sse_lines import DONE, sse_events
from .tool_calls import ToolCallAssembler
from .wire import error_message, usage_from

log = logging.getLogger("keel.llm")


async def chat_deltas(  # noqa: C901  one branch per field of the wire chunk, in wire order
    lines: AsyncIterator[str], *, model: str, provider: str, prices: PriceTable
) -> AsyncGenerator[Delta, None]:
    """The deltas of one streamed answer; ``model`` is the requested model until the server names one."""
    calls = ToolCallAssembler()
    finished = False
    done = False
    response_id: str | None = None
    async with aclosing(sse_events(lines)) as events:
        async for event in events:
            if event.data.strip() == DONE:
                done = True
                break
            chunk = _chunk(event.data)
            if event.event == "error" or chunk.get("error"):
                detail = error_message(chunk) or event.data
                raise LLMError(
                    LLMErrorReason.SERVER_ERROR, f"the model server reported an error mid-stream: {detail}"
                )
            if isinstance(chunk.get("model"), str) and chunk["model"]:
                model = chunk["model"]
            if isinstance(chunk.get("id"), str) and chunk["id"]:
                response_id = chunk["id"]
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                    continue  # Keel asks for one choice; anything else is not part of the answer
                delta = choice.get("delta") or {}
                if not isinstance(delta, Mapping):
                    raise _malformed(f"a choice's delta must be an object, got {delta!r}")
                content = delta.get("content")
                if isinstance(content, str) and content:
                    yield Delta(text=content, model=model, provider=provider, response_id=response_id)
                for fragment in delta.get("tool_calls") or ():
                    calls.add(fragment)
                reason = choice.get("finish_reason")
                if reason and not finished:
                    finished = True
                    yield Delta(
                        tool_calls=calls.finish(),
                        finish_reason=str(reason),
                        model=model,
                        provider=provider,
                        response_id=response_id,
                    )
            raw_usage = chunk.get("usage")
            if isinstance(raw_usage, Mapping):
                usage = usage_from(raw_usage, model, prices)
                yield Delta(usage=usage, model=model, provider=provider, response_id=response_id)
    if not done and not finished:
        raise LLMError(
            LLMErrorReason.CONNECTION, "the model server closed the stream before the answer was complete"
        )
    if not done:
        log.debug("the model stream ended after its finish reason without [DONE]")
    if not finished:
        pending = calls.finish()
        reason = FinishReason.TOOL_CALLS if pending else FinishReason.STOP
        yield Delta(
            tool_calls=pending, finish_reason=reason, model=model, provider=provider, response_id=response_id
        )


def _chunk(data: str) -> Mapping[str, Any]:
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError as exc:
        raise _malformed(f"a stream chunk is not valid JSON ({exc.msg}): {data[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise _malformed(f"a stream chunk must be a JSON object, got {data[:200]!r}")
    return chunk


def _malformed(message: str) -> LLMError:
    return LLMError(LLMErrorReason.MALFORMED_RESPONSE, message)
