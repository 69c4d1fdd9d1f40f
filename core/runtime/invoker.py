"""The Invoker: every model call and tool run goes through its middleware chain.

The application builds the two chains once, as ordered lists (``chat_middleware[0]`` runs first), and
agents call ``await ctx.invoker.chat(request, ctx)`` or ``ctx.invoker.tool(request, ctx)``; retry,
metering, caching and tracing then apply without the agent knowing they exist. Reordering a concern
is editing a list, not patching a method.

``stream`` is the primitive: it returns the chat chain's ``Delta`` stream, whose terminal is the
model's own ``LLMPort.stream()``. ``chat`` is that stream collected with ``assemble_deltas``, so a
cached answer and a live one look the same to every layer above. ``tool`` collects the one-item
stream of the tool chain, whose terminal awaits ``request.tool.run(arguments, ctx)``.

The hot path is kept short on purpose (one ``Call`` and the chain; the chat terminal hands back the
model's iterator instead of wrapping it in another generator), because every middleware layer a
deployment adds is paid on top of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from core.contracts.errors import KeelError
from core.contracts.middleware import Call, Middleware, chain, collect_one
from core.contracts.ports import LLMPort
from core.contracts.types import ChatRequest, Delta, LLMResult, ToolRequest, assemble_deltas

__all__ = ["Invoker", "InvokerNotConfigured"]


class InvokerNotConfigured(KeelError):
    """The invoker was asked for work it has no terminal for (a chat with no model, a tool with none)."""


class Invoker:
    """Runs chat requests and tool requests through their middleware chains."""

    __slots__ = ("_chat", "_tool", "chat_middleware", "llm", "tool_middleware")

    def __init__(
        self,
        *,
        llm: LLMPort | None = None,
        chat_middleware: Sequence[Middleware] = (),
        tool_middleware: Sequence[Middleware] = (),
    ) -> None:
        self.llm = llm
        self.chat_middleware: tuple[Middleware, ...] = tuple(chat_middleware)
        self.tool_middleware: tuple[Middleware, ...] = tuple(tool_middleware)
        self._chat = chain(self.chat_middleware, self._chat_terminal)
        self._tool = chain(self.tool_middleware, _tool_terminal)

    def stream(
        self, request: ChatRequest, ctx: Any, *, meta: dict[str, Any] | None = None
    ) -> AsyncIterator[Delta]:
        """The chat chain's deltas for ``request``, as they arrive."""
        return self._chat(Call("chat", request, ctx, {} if meta is None else meta))

    async def chat(self, request: ChatRequest, ctx: Any, *, meta: dict[str, Any] | None = None) -> LLMResult:
        """``request`` through the chat chain, collected into one result."""
        stream = self._chat(Call("chat", request, ctx, {} if meta is None else meta))
        return assemble_deltas([delta async for delta in stream])

    async def tool(self, request: ToolRequest, ctx: Any, *, meta: dict[str, Any] | None = None) -> Any:
        """``request`` through the tool chain; the tool's one result."""
        return await collect_one(self._tool(Call("tool", request, ctx, {} if meta is None else meta)))

    def _chat_terminal(self, call: Call) -> AsyncIterator[Delta]:
        llm = self.llm
        if llm is None:
            raise InvokerNotConfigured("this Invoker has no llm; build it with Invoker(llm=...)")
        request = call.request
        if not isinstance(request, ChatRequest):
            raise TypeError(f"a chat call needs a ChatRequest, got {type(request).__name__}")
        return llm.stream(
            messages=request.messages,
            model=request.model,
            tools=request.tools,
            response_format=request.response_format,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            cache_hint=request.cache_hint,
        )


async def _tool_terminal(call: Call) -> AsyncIterator[Any]:
    request = call.request
    if not isinstance(request, ToolRequest):
        raise TypeError(f"a tool call needs a ToolRequest, got {type(request).__name__}")
    if request.tool is None:
        raise InvokerNotConfigured(f"tool request {request.name!r} carries no resolved tool to run")
    yield await request.tool.run(request.arguments, call.ctx)
