"""``output_coerce()``: read a chat stream's text as a typed object while it arrives, and at its end.

On a chat call whose output type is known (``output_coerce(SomeType)``, or the ``output_type`` an
agent puts in ``call.meta``, which is how an ``Agent`` with ``output_type=`` uses a bare
``output_coerce()``), each text delta is forwarded with ``Delta.partial`` set to the tolerant partial
object read from the text so far, when it changed since the previous delta (``None`` otherwise).
When the stream ends and the whole text parses strictly, one more delta carries the object as
``Delta.parsed``, so the collected ``LLMResult.parsed`` is the validated answer. A text that does not
parse is passed through unchanged: deciding what an invalid answer means (ask again, or stop) is the
agent's (``Agent(output_retries=...)``), because the deltas of an answer have reached the consumer by
the time it is known to be invalid, and a stream cannot be recalled.

The middleware marks ``call.meta["output_coerced"] = True``: a cognition then forwards
``Delta.partial`` onto ``StreamEvent.partial_output`` verbatim instead of building its own. Tool calls
and chat calls with no output type pass through untouched. Output types are those of
``core.agents.output.SchemaAdapter``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from core.agents.output import SchemaAdapter
from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import Delta

__all__ = ["output_coerce"]


def output_coerce(output_type: Any = None) -> Middleware:
    """Set ``Delta.partial`` as the text streams, and ``Delta.parsed`` once it is complete."""
    if output_type is not None:
        SchemaAdapter(output_type)  # refuse an unsupported type when the chain is built

    async def output_coerce_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        kind = output_type if output_type is not None else call.meta.get("output_type")
        # One adapter per call: it remembers the last partial, so calls must not share one.
        adapter = SchemaAdapter(kind) if kind is not None else None
        if call.kind != "chat" or adapter is None:
            async for item in nxt(call):
                yield item
            return
        call.meta["output_coerced"] = True
        text = ""
        delta: Delta
        async for delta in nxt(call):
            if delta.text:
                text += delta.text
                partial = adapter.partial(text)
                if partial is not None:
                    delta = dataclasses.replace(delta, partial=partial)
            yield delta
        try:
            parsed = adapter.parse(text)
        except (ValueError, TypeError):
            return
        yield Delta(parsed=parsed)

    return output_coerce_middleware
