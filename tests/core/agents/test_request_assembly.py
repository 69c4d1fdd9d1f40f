"""WorkingContext, RequestBuilder, WindowCompactor and the compaction middleware; NoopReplayStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.agents import Agent, RequestBuilder, WindowCompactor, WorkingContext
from core.contracts.replay import ReplayStorePort
from core.contracts.types import ChatRequest, Delta, Message, Prompt, Role, ToolCall
from core.policies import compaction
from core.runtime import NoopReplayStore, Services
from core.testing import FakeGrounder, FakeLLM, RecordingTracer, make_test_ctx


def tool_turn(call_id: str) -> list[Message]:
    call = ToolCall(call_id, "search", {"q": "octopus", "filters": {"tags": ["marine"]}})
    return [
        Message(Role.ASSISTANT, "", tool_calls=(call,)),
        Message(Role.TOOL, "found", name="search", tool_call_id=call_id),
    ]


def test_union_merge_deduplicates_messages_that_carry_tool_calls() -> None:
    shared = [Message(Role.USER, "find octopus facts"), *tool_turn("c1")]
    left = WorkingContext(tuple(shared)).add(Message(Role.ASSISTANT, "left saw this"))
    right = WorkingContext(tuple(shared)).add(*tool_turn("c2"))
    merged = left.merge(right, mode="union")
    assert len(merged) == 6
    assert merged.messages[:3] == tuple(shared)
    assert len(left.merge(right)) == 9  # append keeps both copies
    with pytest.raises(ValueError, match="merge mode"):
        left.merge(right, mode="zip")
    with pytest.raises(TypeError):
        WorkingContext(("not a message",))  # type: ignore[arg-type]


async def test_a_working_context_seeds_a_run() -> None:
    def responder(*, system: str, user: str, model: str) -> str:
        return "ok"

    llm = FakeLLM(responder)
    first = await Agent("a", model="m").run("first", make_test_ctx(llm=llm))
    context = WorkingContext.of(first)
    second = await Agent("b", model="m", system="sys").run("second", make_test_ctx(llm=llm), context=context)
    assert [m.content for m in second.messages] == ["sys", "first", "ok", "second", "ok"]


async def test_request_builder_renders_grounds_and_stamps_the_prompt_version() -> None:
    tracer = RecordingTracer()
    ctx = make_test_ctx(trace=tracer)  # no invoker: a capability test
    grounder = FakeGrounder("The cert expires 2026-08-01.")
    prompt = Prompt("sre", "v3", "You are {role}. Answer in {language}.", {"language": "English"})
    builder = RequestBuilder(prompt, model="m", grounder=grounder)
    request = await builder.build(
        ctx, "why?", role="an SRE", context=WorkingContext((Message(Role.USER, "hi"),))
    )
    assert isinstance(request, ChatRequest)
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "You are an SRE. Answer in English."),
        ("system", "The cert expires 2026-08-01."),
        ("user", "hi"),
        ("user", "why?"),
    ]
    assert grounder.calls == [(ctx, "why?")]
    (span,) = tracer.by_name("build_request")
    assert span.attrs["keel.prompt.version"] == "v3" and span.attrs["keel.prompt.id"] == "sre"
    with pytest.raises(ValueError, match=r"placeholder \{role\}"):
        await builder.build(ctx, "why?")


async def test_window_compactor_keeps_system_and_never_orphans_a_tool_result() -> None:
    messages = [
        Message(Role.SYSTEM, "sys"),
        Message(Role.USER, "u1"),
        *tool_turn("c1"),
        Message(Role.USER, "u2"),
    ]
    compactor = WindowCompactor(max_messages=2)
    compacted = await compactor.compact(messages, None)
    # The window would start at the tool result; it is moved back to its assistant turn.
    assert [m.role for m in compacted] == ["system", "system", "assistant", "tool", "user"]
    assert compacted[1].content == "[1 earlier message(s) left out]"
    assert await WindowCompactor(max_messages=10).compact(messages, None) == messages


async def test_the_compaction_middleware_replaces_the_request_it_forwards() -> None:
    seen: list[int] = []

    def responder(*, system: str, user: str, model: str) -> str:
        return "ok"

    class Counting(FakeLLM):
        async def stream(self, **kwargs: Any) -> AsyncIterator[Delta]:
            seen.append(len(kwargs["messages"]))
            async for delta in super().stream(**kwargs):
                yield delta

    ctx = make_test_ctx(llm=Counting(responder), chat_middleware=[compaction(WindowCompactor(1, note=False))])
    long = [Message(Role.USER, f"m{i}") for i in range(5)]
    request = ChatRequest(messages=long, model="m")
    await ctx.invoker.chat(request, ctx)
    assert seen == [1] and len(request.messages) == 5
    with pytest.raises(TypeError, match="Compactor"):
        compaction(object())


async def test_noop_replay_store_is_the_default_and_finds_nothing() -> None:
    store = Services().replay
    assert isinstance(store, NoopReplayStore) and isinstance(store, ReplayStorePort)
    await store.record("run", "k", {"v": 1})
    assert await store.lookup("run", "k") is None
    await store.forget("run")
    assert make_test_ctx().replay is not Services().replay  # one per Services
