"""semantic_memoize(): near-duplicate questions answered from a VectorPort, above a threshold."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.contracts.middleware import Call, Handler
from core.contracts.types import ChatRequest, Message, Scope, ToolCall
from core.policies import semantic_memoize
from core.state.stores import InMemoryVector
from core.testing import FakeLLM, Turn, make_test_ctx


def ask(text: str, model: str = "m") -> ChatRequest:
    return ChatRequest([Message("system", "be brief"), Message("user", text)], model)


async def test_a_near_duplicate_question_is_answered_from_the_index() -> None:
    llm = FakeLLM("Every 90 days.")
    hits: list[bool] = []

    async def spy(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        async for item in nxt(call):
            yield item
        hits.append(call.meta.get("cache_hit", False))

    ctx = make_test_ctx(
        llm=llm, vector=InMemoryVector(), chat_middleware=[spy, semantic_memoize(threshold=0.8)]
    )
    first = await ctx.invoker.chat(ask("How often do I rotate the cert?"), ctx)
    again = await ctx.invoker.chat(ask("how often do i rotate the CERT"), ctx)
    assert first.content == again.content == "Every 90 days." and llm.calls == 1
    assert again.usage.total_tokens == 0 and hits == [False, True]


async def test_below_the_threshold_the_provider_answers() -> None:
    llm = FakeLLM("answer")
    ctx = make_test_ctx(llm=llm, vector=InMemoryVector(), chat_middleware=[semantic_memoize(threshold=0.95)])
    await ctx.invoker.chat(ask("how often do I rotate the cert"), ctx)
    await ctx.invoker.chat(ask("how often do I rotate the signing key"), ctx)
    assert llm.calls == 2


async def test_entries_are_per_model_and_per_scope() -> None:
    llm = FakeLLM("answer")
    vector = InMemoryVector()
    for model, scope in (("m", Scope(1, 1)), ("other", Scope(1, 1)), ("m", Scope(2, 2)), ("m", Scope(1, 1))):
        ctx = make_test_ctx(llm=llm, vector=vector, scope=scope, chat_middleware=[semantic_memoize()])
        await ctx.invoker.chat(ask("rotate the cert", model), ctx)
    assert llm.calls == 3


async def test_a_conversation_with_history_is_not_cached() -> None:
    llm = FakeLLM("answer")
    ctx = make_test_ctx(llm=llm, vector=InMemoryVector(), chat_middleware=[semantic_memoize()])
    request = ChatRequest(
        [
            Message("user", "rotate the cert"),
            Message("assistant", "which one?"),
            Message("user", "rotate the cert"),
        ],
        "m",
    )
    for _ in range(2):
        await ctx.invoker.chat(request, ctx)
    assert llm.calls == 2


async def test_an_answer_that_asks_for_tools_is_not_stored() -> None:
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("c", "lookup", {})]), Turn(content="done")])
    ctx = make_test_ctx(llm=llm, vector=InMemoryVector(), chat_middleware=[semantic_memoize()])
    await ctx.invoker.chat(ask("rotate the cert"), ctx)
    second = await ctx.invoker.chat(ask("rotate the cert"), ctx)
    assert second.content == "done" and llm.calls == 2


@pytest.mark.parametrize("threshold", [0, -0.1, 1.5])
def test_the_threshold_is_a_similarity(threshold: float) -> None:
    with pytest.raises(ValueError):
        semantic_memoize(threshold=threshold)


async def test_a_different_system_prompt_is_a_different_question() -> None:
    llm = FakeLLM("answer")
    ctx = make_test_ctx(llm=llm, vector=InMemoryVector(), chat_middleware=[semantic_memoize()])
    for system in ("You are a pirate.", "You are a lawyer.", "You are a pirate."):
        request = ChatRequest([Message("system", system), Message("user", "rotate the cert")], "m")
        await ctx.invoker.chat(request, ctx)
    assert llm.calls == 2
