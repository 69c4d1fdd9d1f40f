"""output_coerce() sets Delta.partial and Delta.parsed; cognitions forward the partial verbatim.
BaseMiddleware: the class-style way of writing a middleware."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from core.agents import Agent
from core.contracts.middleware import Call
from core.contracts.types import ChatRequest, Message, StreamEventKind, ToolRequest
from core.policies import BaseMiddleware, output_coerce
from core.testing import FakeLLM, FakeTool, make_test_ctx

ANSWER = '{"title": "Octopus cognition", "body": "Eight arms."}'


class Article(BaseModel):
    title: str
    body: str


def request() -> ChatRequest:
    return ChatRequest(messages=[Message("user", "write")], model="m")


async def test_partials_while_streaming_and_the_parsed_object_at_the_end() -> None:
    ctx = make_test_ctx(llm=FakeLLM(ANSWER, chunk_size=10), chat_middleware=[output_coerce(Article)])
    deltas = [d async for d in ctx.invoker.stream(request(), ctx)]
    partials = [d.partial for d in deltas if d.partial is not None]
    assert [p.model_fields_set for p in partials][:2] == [set(), {"title"}]
    assert deltas[-1].parsed == Article(title="Octopus cognition", body="Eight arms.")
    result = await ctx.invoker.chat(request(), ctx)
    assert result.parsed == Article(title="Octopus cognition", body="Eight arms.")


async def test_an_unparsable_text_passes_through_without_parsed() -> None:
    ctx = make_test_ctx(llm=FakeLLM("sorry, no"), chat_middleware=[output_coerce(Article)])
    result = await ctx.invoker.chat(request(), ctx)
    assert result.parsed is None and result.content == "sorry, no"


async def test_an_agent_forwards_the_middleware_s_partials_verbatim() -> None:
    seen: list[Any] = []

    class Spy(BaseMiddleware):
        kinds = frozenset({"chat"})

        async def on_item(self, call: Call, item: Any) -> Any:
            seen.append(item.partial)
            return item

    # Spy sits outside output_coerce, so it sees exactly what the cognition receives.
    ctx = make_test_ctx(llm=FakeLLM(ANSWER, chunk_size=10), chat_middleware=[Spy(), output_coerce()])
    agent = Agent("writer", model="m", output_type=Article)
    events = [e async for e in agent.stream("write", ctx)]
    forwarded = [e.partial_output for e in events if e.kind == StreamEventKind.MESSAGE_DELTA]
    assert forwarded == seen[: len(forwarded)]
    assert any(p is not None for p in forwarded)
    assert all(p is s for p, s in zip(forwarded, seen, strict=False))
    assert events[-1].result.parsed == Article(title="Octopus cognition", body="Eight arms.")


async def test_tool_calls_and_untyped_chats_pass_through() -> None:
    ctx = make_test_ctx(
        llm=FakeLLM("plain"), chat_middleware=[output_coerce()], tool_middleware=[output_coerce()]
    )
    assert (await ctx.invoker.chat(request(), ctx)).parsed is None
    assert await ctx.invoker.tool(ToolRequest("t", tool=FakeTool("t", responder=7)), ctx) == 7


def test_an_unsupported_type_is_refused_when_the_chain_is_built() -> None:
    with pytest.raises(TypeError):
        output_coerce(int)


class Recorder(BaseMiddleware):
    def __init__(self) -> None:
        self.log: list[str] = []

    async def before(self, call: Call) -> None:
        self.log.append(f"before {call.kind}")

    async def on_item(self, call: Call, item: Any) -> Any:
        self.log.append("item")
        return item.upper() if isinstance(item, str) else item

    async def after(self, call: Call) -> None:
        self.log.append("after")

    async def on_error(self, call: Call, exc: Exception) -> None:
        self.log.append(f"error {type(exc).__name__}")


async def test_class_middleware_hooks_run_in_order_and_can_replace_items() -> None:
    recorder = Recorder()
    ctx = make_test_ctx(llm=FakeLLM(), tool_middleware=[recorder])
    assert await ctx.invoker.tool(ToolRequest("t", tool=FakeTool("t", responder="ok")), ctx) == "OK"
    assert recorder.log == ["before tool", "item", "after"]
    with pytest.raises(RuntimeError):
        await ctx.invoker.tool(ToolRequest("t", tool=FakeTool("t", responder=RuntimeError("x"))), ctx)
    assert recorder.log[-2:] == ["before tool", "error RuntimeError"]


async def test_kinds_limits_a_class_middleware() -> None:
    class ChatOnly(Recorder):
        kinds = frozenset({"chat"})

    only = ChatOnly()
    ctx = make_test_ctx(llm=FakeLLM("hi"), chat_middleware=[only], tool_middleware=[only])
    await ctx.invoker.tool(ToolRequest("t", tool=FakeTool("t", responder=1)), ctx)
    assert only.log == []
    await ctx.invoker.chat(request(), ctx)
    assert only.log[0] == "before chat" and only.log[-1] == "after"
