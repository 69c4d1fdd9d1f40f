"""The model behind ``LLM_PROVIDER=echo``: a small, deterministic, offline stand-in for demos.

It needs no key and no network and always answers the same way, so a fresh checkout can run an
agent end to end. It is production code (a demo is a real use), not a test double: tests script
their model with ``core.testing.FakeLLM`` instead. Its rules:

* The answer is ``echo: `` followed by the text of the last user message (or, after a tool ran,
  ``echo: `` and that tool's result), streamed word by word.
* It never asks for a tool, so an agent with tools gets a direct answer.
* Usage counts words, not tokens: every whitespace-separated word of the transcript is one input
  token, every word of the answer one output token. Its cost comes from the price table like any
  other model's (``0`` unless ``LLM_PRICES`` prices ``echo``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from core.contracts.types import ChatRequest, Delta, FinishReason, Role, Usage

from .config import LlmConfig

PREFIX = "echo:"


class EchoBackend:
    """Answers every request by echoing it back."""

    def __init__(self, config: LlmConfig) -> None:
        self.config = config
        self.server_address = "localhost"
        self.server_port: int | None = None

    def describe(self) -> str:
        return "echo provider: a deterministic offline demo model that repeats its input (not a real LLM)"

    async def close(self) -> None:
        return None

    async def ping(self) -> bool:
        return True

    async def stream(self, request: ChatRequest) -> AsyncGenerator[Delta, None]:
        provider = self.config.provider_name
        last = request.messages[-1] if request.messages else None
        source = last.content if last is not None and last.role in (Role.USER, Role.TOOL) else ""
        if not source:
            source = next((m.content for m in reversed(request.messages) if m.role == Role.USER), "")
        words = [PREFIX, *source.split()]
        for position, word in enumerate(words):
            await asyncio.sleep(0)  # a real stream yields to the loop between chunks
            yield Delta(text=word if position == 0 else f" {word}", model=request.model, provider=provider)
        input_tokens = sum(len(m.content.split()) for m in request.messages)
        output_tokens = len(words)
        price = self.config.prices.price_for(request.model)  # unpriced: free, and not worth a warning
        cost = price.cost(input_tokens, output_tokens) if price is not None else 0.0
        yield Delta(
            finish_reason=FinishReason.STOP,
            usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost),
            model=request.model,
            provider=provider,
        )
