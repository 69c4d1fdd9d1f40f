"""fallback(models=[...]): swap the request's model after a permanent pre-stream failure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.contracts.errors import ErrorClass
from core.contracts.middleware import Call, Handler
from core.contracts.types import ChatRequest, Message, ToolRequest
from core.policies import fallback, retry
from core.testing import FakeClock, FakeLLM, FakeTool, make_test_ctx

REQUEST = ChatRequest([Message("user", "hi")], "primary")


class ModelGone(Exception):
    error_class = ErrorClass.PERMANENT


def models_that_fail(failing: dict[str, Exception], asked: list[str]) -> FakeLLM:
    def responder(*, system: str, user: str, model: str) -> str:
        asked.append(model)
        if model in failing:
            raise failing[model]
        return f"answer from {model}"

    return FakeLLM(responder)


async def test_a_permanent_failure_moves_to_the_next_model() -> None:
    asked: list[str] = []
    llm = models_that_fail({"primary": ModelGone("404 model"), "second": ModelGone("gone too")}, asked)
    meta: list[Any] = []

    async def spy(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        async for item in nxt(call):
            yield item
        meta.append((call.meta.get("fallback_model"), call.request.model))  # type: ignore[union-attr]

    ctx = make_test_ctx(llm=llm, chat_middleware=[spy, fallback(["second", "third"])])
    result = await ctx.invoker.chat(REQUEST, ctx)
    assert result.content == "answer from third" and result.model == "third"
    assert asked == ["primary", "second", "third"]
    assert meta == [("third", "third")]
    assert REQUEST.model == "primary"  # the original request is untouched


@pytest.mark.parametrize("error", [TimeoutError("flaky"), ValueError("unknown")])
async def test_transient_and_unknown_failures_do_not_fall_back(error: Exception) -> None:
    asked: list[str] = []
    ctx = make_test_ctx(
        llm=models_that_fail({"primary": error}, asked), chat_middleware=[fallback(["second"])]
    )
    with pytest.raises(type(error)):
        await ctx.invoker.chat(REQUEST, ctx)
    assert asked == ["primary"]


async def test_the_last_model_failing_raises_its_error() -> None:
    asked: list[str] = []
    llm = models_that_fail({"primary": ModelGone("a"), "second": ModelGone("b")}, asked)
    ctx = make_test_ctx(llm=llm, chat_middleware=[fallback(["second", "primary"])])
    with pytest.raises(ModelGone, match="b"):
        await ctx.invoker.chat(REQUEST, ctx)
    assert asked == ["primary", "second"]  # the requested model is not tried twice


async def test_retry_inside_fallback_handles_the_transient_part() -> None:
    asked: list[str] = []
    attempts = {"n": 0}

    def responder(*, system: str, user: str, model: str) -> str:
        asked.append(model)
        if model == "primary":
            attempts["n"] += 1
            raise TimeoutError("flaky") if attempts["n"] == 1 else ModelGone("then gone")
        return "ok"

    clock = FakeClock()
    chain = [fallback(["second"]), retry(max_attempts=3, sleep=clock.sleep)]
    ctx = make_test_ctx(llm=FakeLLM(responder), chat_middleware=chain)
    assert (await ctx.invoker.chat(REQUEST, ctx)).content == "ok"
    assert asked == ["primary", "primary", "second"] and len(clock.sleeps) == 1


async def test_tool_calls_pass_through_and_models_are_required() -> None:
    ctx = make_test_ctx(llm=FakeLLM(), tool_middleware=[fallback(["x"])])
    assert await ctx.invoker.tool(ToolRequest("t", {}, tool=FakeTool("t", "r")), ctx) == "r"
    with pytest.raises(ValueError):
        fallback([])
