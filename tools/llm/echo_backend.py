"""The model behind ``LLM_PROVIDER=echo``: a small, deterministic, offline stand-in for demos.

It needs no key and no network and always answers the same way, so a fresh checkout can run an
agent end to end. It is production code (a demo is a real use), not a test double: tests script
their model with ``core.testing.FakeLLM`` instead. Its rules:

* The answer is ``echo: `` followed by the text of the last user message (or, after a tool ran,
  ``echo: `` and that tool's result), streamed word by word.
* It calls a tool when the last user message names one of the tools the request offers: a
  scripted, deterministic call with arguments taken from the message
  (:mod:`tools.llm.echo_tools` has the rules), answered after the result with ``echo: <result>``.
  A message that names no offered tool gets the echo, as before; so does any request offering none.
* Usage counts words, not tokens: every whitespace-separated word of the transcript is one input
  token, every word of the answer one output token (a tool call is one). Its cost comes from the
  price table like any other model's (``0`` unless ``LLM_PRICES`` prices ``echo``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from core.contracts.types import ChatRequest, Delta, FinishReason, Role, Usage

from .config import LlmConfig
from .echo_tools import scripted_tool_call

PREFIX = "echo:"


class EchoBackend:
    """Answers every request by echoing it back."""

    def __init__(self, config: LlmConfig) -> None:
        self.config = config
        self.server_address = "localhost"
        self.server_port: int | None = None

    def describe(self) -> str:
        return (
            "echo provider: a deterministic offline demo model that repeats its input and calls a "
            "tool its message names (not a real LLM)"
        )

    async def close(self) -> None:
        return None

    async def ping(self) -> bool:
        return True

    async def stream(self, request: ChatRequest) -> AsyncGenerator[Delta, None]:
        provider = self.config.provider_name
        call = scripted_tool_call(request.messages, request.tools)
        if call is not None:
            await asyncio.sleep(0)
            yield Delta(
                tool_calls=(call,),
                finish_reason=FinishReason.TOOL_CALLS,
                usage=self._usage(request, 1),
                model=request.model,
                provider=provider,
            )
            return
        last = request.messages[-1] if request.messages else None
        source = last.content if last is not None and last.role in (Role.USER, Role.TOOL) else ""
        if not source:
            source = next((m.content for m in reversed(request.messages) if m.role == Role.USER), "")
        words = [PREFIX, *source.split()]
        for position, word in enumerate(words):
            await asyncio.sleep(0)  # a real stream yields to the loop between chunks
            yield Delta(text=word if position == 0 else f" {word}", model=request.model, provider=provider)
        yield Delta(
            finish_reason=FinishReason.STOP,
            usage=self._usage(request, len(words)),
            model=request.model,
            provider=provider,
        )

    def _usage(self, request: ChatRequest, output_tokens: int) -> Usage:
        """Words as tokens (a tool call counts as one output token), priced from the table."""
        input_tokens = sum(len(m.content.split()) for m in request.messages)
        price = self.config.prices.price_for(request.model)  # unpriced: free, and not worth a warning
        cost = price.cost(input_tokens, output_tokens) if price is not None else 0.0
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost)
