"""memoize() and idempotent(): exact reuse keyed by stable_hash, per scope, never caching a failure."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.contracts.errors import StoreUnavailable
from core.contracts.middleware import Call, Handler
from core.contracts.types import ChatRequest, Message, Scope, ToolCall, ToolRequest, ToolSchema
from core.policies import chat_cache_key, idempotency_key, idempotent, memoize, meter
from core.state.stores import InMemoryStore
from core.testing import FakeClock, FakeLLM, FakeTool, Turn, make_test_ctx

REQUEST = ChatRequest([Message("system", "be brief"), Message("user", "hi")], "m")


def test_the_key_covers_everything_that_changes_the_answer() -> None:
    base = chat_cache_key(REQUEST)
    assert base.startswith("memo:") and base == chat_cache_key(ChatRequest(list(REQUEST.messages), "m"))
    variants = [
        dataclasses.replace(REQUEST, model="other"),
        dataclasses.replace(REQUEST, messages=[Message("user", "hi")]),
        dataclasses.replace(REQUEST, tools=[ToolSchema("search")]),
        dataclasses.replace(REQUEST, temperature=0.5),
        dataclasses.replace(REQUEST, max_tokens=10),
        dataclasses.replace(REQUEST, response_format={"type": "json_object"}),
        dataclasses.replace(
            REQUEST,
            messages=[
                *REQUEST.messages,
                Message("assistant", "", tool_calls=[ToolCall("c", "weather", {"city": "SF"})]),
            ],
        ),
    ]
    keys = {chat_cache_key(v) for v in variants}
    assert base not in keys and len(keys) == len(variants)
    sf = variants[-1]
    nyc_call = ToolCall("c", "weather", {"city": "NYC"})
    nyc = dataclasses.replace(
        sf, messages=[*REQUEST.messages, Message("assistant", "", tool_calls=[nyc_call])]
    )
    assert chat_cache_key(sf) != chat_cache_key(nyc)


async def test_a_hit_skips_the_provider_and_replays_the_answer() -> None:
    llm = FakeLLM("cached answer")
    hits: list[Any] = []

    async def spy(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        async for item in nxt(call):
            yield item
        hits.append(call.meta.get("cache_hit", False))

    ctx = make_test_ctx(llm=llm, store=InMemoryStore(), chat_middleware=[spy, memoize()])
    first = await ctx.invoker.chat(REQUEST, ctx)
    second = await ctx.invoker.chat(REQUEST, ctx)
    assert first.content == second.content == "cached answer" and llm.calls == 1
    assert first.usage.total_tokens == 15 and second.usage.total_tokens == 0  # a hit consumed nothing
    assert second.finish_reason == "stop" and second.model == "m"
    assert hits == [False, True]


async def test_a_miss_streams_the_live_deltas() -> None:
    ctx = make_test_ctx(llm=FakeLLM("x" * 20), store=InMemoryStore(), chat_middleware=[memoize()])
    texts = [d.text async for d in ctx.invoker.stream(REQUEST, ctx)]
    assert texts == ["x" * 8, "x" * 8, "x" * 4, ""]


async def test_tool_calls_survive_the_cache() -> None:
    call = ToolCall("c1", "lookup", {"host": "example.com", "ports": [443]})
    llm = FakeLLM.script([Turn(tool_calls=[call])])
    ctx = make_test_ctx(llm=llm, store=InMemoryStore(), chat_middleware=[memoize()])
    await ctx.invoker.chat(REQUEST, ctx)
    replayed = await ctx.invoker.chat(REQUEST, ctx)
    assert replayed.tool_calls == (call,) and replayed.finish_reason == "tool_calls"


async def test_entries_do_not_cross_tenants() -> None:
    llm = FakeLLM("answer")
    store = InMemoryStore()
    for scope in (Scope(1, 1), Scope(999, 1), Scope(1, 1)):
        ctx = make_test_ctx(llm=llm, store=store, scope=scope, chat_middleware=[memoize()])
        await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 2


async def test_a_failure_is_never_cached() -> None:
    llm = FakeLLM("ok", fail_times=1)
    ctx = make_test_ctx(llm=llm, store=InMemoryStore(), chat_middleware=[memoize()])
    with pytest.raises(TimeoutError):
        await ctx.invoker.chat(REQUEST, ctx)
    assert (await ctx.invoker.chat(REQUEST, ctx)).content == "ok"
    assert (await ctx.invoker.chat(REQUEST, ctx)).content == "ok"
    assert llm.calls == 2


async def test_entries_expire_after_ttl() -> None:
    clock = FakeClock()
    llm = FakeLLM("ok")
    ctx = make_test_ctx(llm=llm, store=InMemoryStore(clock=clock), chat_middleware=[memoize(ttl=60)])
    await ctx.invoker.chat(REQUEST, ctx)
    clock.advance(59)
    await ctx.invoker.chat(REQUEST, ctx)
    clock.advance(1)
    await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 2


async def test_an_explicit_store_wins_over_the_context_store() -> None:
    mine, ctx_store = InMemoryStore(), InMemoryStore()
    ctx = make_test_ctx(llm=FakeLLM("ok"), store=ctx_store, chat_middleware=[memoize(mine)])
    await ctx.invoker.chat(REQUEST, ctx)
    assert await mine.get(chat_cache_key(REQUEST)) is not None
    assert await ctx_store.get(chat_cache_key(REQUEST)) is None


async def test_a_hit_inside_meter_counts_the_call_but_costs_nothing() -> None:
    ctx = make_test_ctx(llm=FakeLLM("ok"), store=InMemoryStore(), chat_middleware=[meter(), memoize()])
    for _ in range(3):
        await ctx.invoker.chat(REQUEST, ctx)
    assert ctx.budget.calls == 3 and str(ctx.budget.spent()) == "0.000100"


async def test_memoize_passes_tool_calls_through() -> None:
    tool = FakeTool("t", responder="r")
    ctx = make_test_ctx(llm=FakeLLM(), store=InMemoryStore(), tool_middleware=[memoize()])
    for _ in range(2):
        await ctx.invoker.tool(ToolRequest("t", {}, tool=tool), ctx)
    assert len(tool.calls) == 2


# ---- idempotent ------------------------------------------------------------------------------------


def test_the_idempotency_key_is_the_tool_and_its_arguments() -> None:
    a = ToolRequest("send", {"to": "ops", "body": {"x": 1}})
    assert idempotency_key(a) == idempotency_key(ToolRequest("send", {"body": {"x": 1}, "to": "ops"}))
    assert idempotency_key(a) != idempotency_key(ToolRequest("send", {"to": "dev", "body": {"x": 1}}))
    assert idempotency_key(a) != idempotency_key(ToolRequest("post", {"to": "ops", "body": {"x": 1}}))


async def test_a_repeated_tool_request_returns_the_stored_result() -> None:
    sent: list[str] = []

    def send(args: dict[str, Any]) -> dict[str, Any]:
        sent.append(args["to"])
        return {"message_id": len(sent)}

    tool = FakeTool("send", responder=send, side_effecting=True)
    ctx = make_test_ctx(llm=FakeLLM(), store=InMemoryStore(), tool_middleware=[idempotent()])
    results = [
        await ctx.invoker.tool(ToolRequest("send", {"to": to}, tool=tool), ctx)
        for to in ("ops", "ops", "dev")
    ]
    assert results == [{"message_id": 1}, {"message_id": 1}, {"message_id": 2}]
    assert sent == ["ops", "dev"]


async def test_a_failed_tool_run_is_not_stored() -> None:
    outcomes: list[Any] = [ConnectionError("smtp down"), "sent"]

    def send(args: dict[str, Any]) -> Any:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    tool = FakeTool("send", responder=send)
    ctx = make_test_ctx(llm=FakeLLM(), store=InMemoryStore(), tool_middleware=[idempotent()])
    request = ToolRequest("send", {"to": "ops"}, tool=tool)
    with pytest.raises(ConnectionError):
        await ctx.invoker.tool(request, ctx)
    assert await ctx.invoker.tool(request, ctx) == "sent"
    assert await ctx.invoker.tool(request, ctx) == "sent"
    assert len(tool.calls) == 2


async def test_idempotency_is_per_scope_and_chat_passes_through() -> None:
    tool = FakeTool("send", responder="ok")
    store = InMemoryStore()
    for scope in (Scope(1, 1), Scope(2, 2)):
        ctx = make_test_ctx(llm=FakeLLM("hi"), store=store, scope=scope, tool_middleware=[idempotent()])
        await ctx.invoker.tool(ToolRequest("send", {}, tool=tool), ctx)
    assert len(tool.calls) == 2
    llm = FakeLLM("hi")
    ctx = make_test_ctx(llm=llm, store=store, chat_middleware=[idempotent()])
    for _ in range(2):
        await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 2


class _DownStore(InMemoryStore):
    """A store whose backend cannot be reached: every lookup fails."""

    def __init__(self, *, after_producing: bool = False) -> None:
        super().__init__()
        self._after = after_producing

    async def get_or_set(self, key: str, fn: Any, **kwargs: Any) -> Any:
        if self._after:
            await fn()
        raise StoreUnavailable("cache backend unreachable")


@pytest.mark.parametrize("after_producing", [False, True])
async def test_a_cache_outage_answers_uncached_instead_of_failing(
    after_producing: bool, caplog: pytest.LogCaptureFixture
) -> None:
    llm = FakeLLM("still answered")
    store = _DownStore(after_producing=after_producing)
    ctx = make_test_ctx(llm=llm, store=store, chat_middleware=[memoize()])
    result = await ctx.invoker.chat(REQUEST, ctx)
    assert result.content == "still answered" and llm.calls == 1
    assert "store is unavailable" in caplog.text


async def test_an_inner_store_outage_during_the_call_is_not_mistaken_for_a_cache_outage() -> None:
    async def failing_inner(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        raise StoreUnavailable("an inner layer's store is down")
        yield

    llm = FakeLLM("x")
    ctx = make_test_ctx(llm=llm, store=InMemoryStore(), chat_middleware=[memoize(), failing_inner])
    with pytest.raises(StoreUnavailable, match="inner layer"):
        await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 0


async def test_idempotent_does_not_step_around_a_store_outage() -> None:
    tool = FakeTool("send", responder="sent")
    ctx = make_test_ctx(llm=FakeLLM(), store=_DownStore(), tool_middleware=[idempotent()])
    with pytest.raises(StoreUnavailable):
        await ctx.invoker.tool(ToolRequest("send", {}, tool=tool), ctx)
    assert tool.calls == []
