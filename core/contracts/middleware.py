"""The one way a cross-cutting concern wraps a unit of work: ``Call``, handlers and ``chain``.

Both kinds of work the kernel does, a model call and a tool run, travel as a :class:`Call`. A
*handler* takes a call and returns an async iterator of the operation's items: ``Delta`` s for a
chat, exactly one result for a tool. A *middleware* takes a call and the next handler and is
itself an async generator, so it can act before, after, around or instead of the rest of the
chain (retry calls ``nxt`` again, fallback swaps ``call.request`` and calls it again, a cache
may never call it). ``chain`` folds a list of middlewares around a terminal handler, first
element outermost.

Choices made here (each is tested):

* ``Call.request`` is a mutable slot holding an immutable request: rewrite the work by assigning
  a new request (``dataclasses.replace``), never by editing the old one. ``meta`` is a plain,
  mutable dict for signals between the middlewares of one call.
* ``Call.kind`` must be ``"chat"`` or ``"tool"`` (``ValueError`` otherwise); ``ctx`` is the
  run's context, typed ``Any`` because the runtime's ``RunContext`` is defined above this layer
  and middlewares read more of it than the ``Ctx`` slice.
* ``chain`` adds one closure call per layer and nothing else; an empty list returns the terminal
  itself.
* ``collect_one`` insists on exactly one item. An empty stream or a second item raises
  ``StreamShapeError`` (a second item closes the stream first); errors raised by the stream
  itself propagate unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.contracts.errors import KeelError
from core.contracts.types import ChatRequest, Operation, ToolRequest, assemble_deltas

__all__ = [
    "Call",
    "CallKind",
    "Handler",
    "Middleware",
    "StreamShapeError",
    "chain",
    "collect",
    "collect_one",
]


class CallKind(StrEnum):
    """The two kinds of work a ``Call`` can carry."""

    CHAT = "chat"
    TOOL = "tool"


_OPERATIONS = {CallKind.CHAT: Operation.MODEL_CALL, CallKind.TOOL: Operation.TOOL_CALL}


class StreamShapeError(KeelError):
    """A handler's stream did not have the shape its kind promises (one item for a tool)."""


@dataclass(slots=True, eq=False)
class Call:
    """One unit of work travelling through a middleware chain."""

    kind: str
    request: ChatRequest | ToolRequest
    ctx: Any
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in _OPERATIONS:
            raise ValueError(f"Call.kind must be 'chat' or 'tool', got {self.kind!r}")

    @property
    def operation(self) -> Operation:
        """The kind as an ``Operation``: ``MODEL_CALL`` for a chat, ``TOOL_CALL`` for a tool."""
        return _OPERATIONS[CallKind(self.kind)]


Handler = Callable[[Call], AsyncIterator[Any]]
Middleware = Callable[[Call, Handler], AsyncIterator[Any]]


def chain(middlewares: Sequence[Middleware], terminal: Handler) -> Handler:
    """Fold ``middlewares`` around ``terminal`` into one handler; ``middlewares[0]`` runs first."""
    handler = terminal
    for middleware in reversed(middlewares):
        handler = _bind(middleware, handler)
    return handler


def _bind(middleware: Middleware, nxt: Handler) -> Handler:
    def handler(call: Call) -> AsyncIterator[Any]:
        return middleware(call, nxt)

    return handler


async def collect(stream: AsyncIterator[Any], kind: str) -> Any:
    """Reduce a handler's stream to its result: an ``LLMResult`` for a chat, the item for a tool."""
    if kind == CallKind.CHAT:
        return assemble_deltas([delta async for delta in stream])
    if kind == CallKind.TOOL:
        return await collect_one(stream)
    raise ValueError(f"kind must be 'chat' or 'tool', got {kind!r}")


async def collect_one(stream: AsyncIterator[Any]) -> Any:
    """The single item of a one-item stream; ``StreamShapeError`` if there are none or several."""
    try:
        item = await anext(stream)
    except StopAsyncIteration:
        raise StreamShapeError("expected exactly one item, but the stream was empty") from None
    try:
        await anext(stream)
    except StopAsyncIteration:
        return item
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
    raise StreamShapeError("expected exactly one item, but the stream yielded more than one")
