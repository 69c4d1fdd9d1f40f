"""The Invoker: chat and tool requests through their chains, in order, to the right terminal."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.types import ChatRequest, Message, ToolRequest
from core.runtime import Invoker, InvokerNotConfigured, RunContext, Services
from core.testing import FakeLLM, FakeTool

REQUEST = ChatRequest([Message("user", "hi")], "fake-model")


def recording(name: str, log: list[str]) -> Middleware:
    async def middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        log.append(f"{name} in")
        async for item in nxt(call):
            yield item
        log.append(f"{name} out")

    return middleware


def ctx_for(invoker: Invoker) -> RunContext:
    return RunContext(services=Services(invoker=invoker))


async def test_chat_runs_the_chain_first_element_outermost() -> None:
    log: list[str] = []
    invoker = Invoker(llm=FakeLLM("42"), chat_middleware=[recording("a", log), recording("b", log)])
    result = await invoker.chat(REQUEST, ctx_for(invoker))
    assert result.content == "42" and result.provider == "fake" and result.model == "fake-model"
    assert log == ["a in", "b in", "b out", "a out"]


async def test_stream_hands_back_the_deltas_as_they_come() -> None:
    invoker = Invoker(llm=FakeLLM("x" * 20, chunk_size=8))
    texts = [delta.text async for delta in invoker.stream(REQUEST, ctx_for(invoker))]
    assert texts == ["x" * 8, "x" * 8, "x" * 4, ""]


async def test_a_middleware_can_rewrite_the_request_and_read_meta() -> None:
    seen: list[str] = []

    def responder(*, system: str, user: str, model: str) -> str:
        seen.append(model)
        return "ok"

    async def swap_model(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        assert isinstance(call.request, ChatRequest)
        call.request = dataclasses.replace(call.request, model=call.meta["model"])
        async for item in nxt(call):
            yield item

    invoker = Invoker(llm=FakeLLM(responder), chat_middleware=[swap_model])
    await invoker.chat(REQUEST, ctx_for(invoker), meta={"model": "other"})
    assert seen == ["other"]


async def test_tool_runs_the_tool_chain_and_passes_arguments_and_ctx() -> None:
    received: list[tuple[Mapping[str, Any], Any]] = []

    class Probe:
        name = "probe"
        schema = None

        async def run(self, args: Mapping[str, Any], ctx: Any) -> str:
            received.append((args, ctx))
            return "done"

    log: list[str] = []
    invoker = Invoker(tool_middleware=[recording("t", log)])
    ctx = ctx_for(invoker)
    result = await invoker.tool(ToolRequest("probe", {"x": 1}, tool=Probe()), ctx)
    assert result == "done"
    assert received == [({"x": 1}, ctx)]
    assert log == ["t in", "t out"]


async def test_chat_without_an_llm_is_a_clear_error() -> None:
    invoker = Invoker()
    with pytest.raises(InvokerNotConfigured, match="no llm"):
        await invoker.chat(REQUEST, ctx_for(invoker))


async def test_a_tool_request_without_a_resolved_tool_is_a_clear_error() -> None:
    invoker = Invoker()
    with pytest.raises(InvokerNotConfigured, match="'ghost'"):
        await invoker.tool(ToolRequest("ghost", {}), ctx_for(invoker))


async def test_requests_of_the_wrong_kind_are_refused() -> None:
    invoker = Invoker(llm=FakeLLM("x"))
    ctx = ctx_for(invoker)
    with pytest.raises(TypeError):
        await invoker.chat(ToolRequest("t", {}, tool=FakeTool("t")), ctx)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await invoker.tool(REQUEST, ctx)  # type: ignore[arg-type]


def test_the_chains_are_kept_as_given() -> None:
    mw = recording("x", [])
    invoker = Invoker(llm=FakeLLM(), chat_middleware=[mw], tool_middleware=[mw, mw])
    assert invoker.chat_middleware == (mw,) and invoker.tool_middleware == (mw, mw)
