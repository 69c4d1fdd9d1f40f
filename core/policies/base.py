"""``BaseMiddleware``: the class-based way to write a middleware, next to the async-generator one.

A middleware is any callable ``(call, nxt) -> AsyncIterator``; the shipped ones are async-generator
functions. A concern that carries configuration and several hooks often reads better as a class:
subclass ``BaseMiddleware``, override the hooks you need, and put an *instance* in the chain.

The hooks, in the order they run:

* ``before(call)``: before the rest of the chain; it may replace ``call.request`` (never edit it).
* ``on_item(call, item)``: each item on its way out (a ``Delta`` for a chat, the one result of a
  tool); return the item to forward (the same one, or a replacement).
* ``after(call)``: once the inner stream has ended normally.
* ``on_error(call, exc)``: when the rest of the chain raised an ``Exception``; the exception is then
  re-raised. ``BaseException`` s (task cancellation, ``ScriptExhausted``) pass without it.

``kinds`` limits the middleware to ``{"chat"}`` or ``{"tool"}``; a call of another kind passes
straight through without any hook. Every hook is optional and async; the defaults do nothing. For
retrying or skipping the inner chain (which hooks cannot express), override ``__call__`` itself or
write an async-generator middleware.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from core.contracts.middleware import Call, Handler

__all__ = ["BaseMiddleware"]


class BaseMiddleware:
    """A middleware written as a class: override ``before`` / ``on_item`` / ``after`` / ``on_error``."""

    kinds: ClassVar[frozenset[str]] = frozenset({"chat", "tool"})

    async def before(self, call: Call) -> None:
        return None

    async def on_item(self, call: Call, item: Any) -> Any:
        return item

    async def after(self, call: Call) -> None:
        return None

    async def on_error(self, call: Call, exc: Exception) -> None:
        return None

    async def __call__(self, call: Call, nxt: Handler) -> AsyncIterator[Any]:
        if call.kind not in self.kinds:
            async for item in nxt(call):
                yield item
            return
        await self.before(call)
        try:
            async for item in nxt(call):
                yield await self.on_item(call, item)
        except Exception as exc:
            await self.on_error(call, exc)
            raise
        await self.after(call)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
