"""The Call / Middleware / chain contract and the collect reducers."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.contracts.errors import KeelError
from core.contracts.middleware import Call, Handler, StreamShapeError, chain, collect, collect_one
from core.contracts.types import ChatRequest, Delta, LLMResult, Message, Operation, ToolRequest, Usage


def chat_call() -> Call:
    return Call("chat", ChatRequest([Message("user", "hi")], "fake-model"), ctx=None)


async def two_deltas(call: Call) -> AsyncIterator[Any]:
    assert isinstance(call.request, ChatRequest)
    yield Delta(text="4", model=call.request.model)
    yield Delta(text="2", usage=Usage(10, 5), finish_reason="stop", provider="fake")


def recording(name: str, log: list[str]) -> Any:
    async def middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        log.append(f"{name} before")
        async for item in nxt(call):
            yield item
        log.append(f"{name} after")

    return middleware


def test_call_holds_kind_request_context_and_a_fresh_meta_per_call() -> None:
    call = chat_call()
    assert call.kind == "chat" and call.operation is Operation.MODEL_CALL and call.meta == {}
    assert chat_call().meta is not call.meta
    tool_call = Call("tool", ToolRequest("echo", {}), ctx="ctx", meta={"hit": True})
    assert tool_call.operation is Operation.TOOL_CALL and tool_call.meta == {"hit": True}
    with pytest.raises(ValueError, match="'chat' or 'tool'"):
        Call("embed", ToolRequest("echo"), ctx=None)


def test_call_request_is_a_mutable_slot_holding_an_immutable_request() -> None:
    call = chat_call()
    assert isinstance(call.request, ChatRequest)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.request.model = "other"  # type: ignore[misc]
    call.request = dataclasses.replace(call.request, model="fallback")
    assert call.request.model == "fallback"


async def test_chain_runs_the_first_middleware_outermost() -> None:
    log: list[str] = []
    handler = chain([recording("a", log), recording("b", log)], two_deltas)
    result = await collect(handler(chat_call()), "chat")
    assert log == ["a before", "b before", "b after", "a after"]
    assert result.content == "42" and result.usage.total_tokens == 15 and result.provider == "fake"


def test_an_empty_chain_is_the_terminal_itself() -> None:
    assert chain([], two_deltas) is two_deltas


async def test_a_middleware_can_rewrite_the_request_before_the_rest_of_the_chain() -> None:
    async def fallback(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        assert isinstance(call.request, ChatRequest)
        call.request = dataclasses.replace(call.request, model="fallback-model")
        async for item in nxt(call):
            yield item

    result = await collect(chain([fallback], two_deltas)(chat_call()), "chat")
    assert result.model == "fallback-model"


async def test_a_middleware_can_answer_instead_of_the_rest_of_the_chain() -> None:
    terminal_calls = 0

    async def terminal(call: Call) -> AsyncIterator[Any]:
        nonlocal terminal_calls
        terminal_calls += 1
        yield Delta(text="live")

    async def cache(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        call.meta["cache"] = "hit"
        yield Delta(text="cached")

    call = chat_call()
    result = await collect(chain([cache], terminal)(call), "chat")
    assert (result.content, terminal_calls, call.meta) == ("cached", 0, {"cache": "hit"})


async def test_a_middleware_can_invoke_the_rest_of_the_chain_again() -> None:
    attempts = 0

    async def flaky(call: Call) -> AsyncIterator[Any]:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise TimeoutError("upstream timeout")
        yield Delta(text="recovered")

    async def retry(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        for _ in range(3):
            try:
                items = [item async for item in nxt(call)]
            except TimeoutError:
                continue
            for item in items:
                yield item
            return

    result = await collect(chain([retry], flaky)(chat_call()), "chat")
    assert (result.content, attempts) == ("recovered", 3)


async def test_collect_reduces_a_chat_to_an_llm_result_and_a_tool_to_its_item() -> None:
    result = await collect(two_deltas(chat_call()), "chat")
    assert isinstance(result, LLMResult) and result.content == "42"

    async def tool(call: Call) -> AsyncIterator[Any]:
        yield {"ok": True}

    assert await collect(tool(chat_call()), "tool") == {"ok": True}
    with pytest.raises(ValueError, match="'chat' or 'tool'"):
        await collect(tool(chat_call()), "embed")


async def test_collect_one_returns_the_single_item() -> None:
    async def one() -> AsyncIterator[int]:
        yield 7

    assert await collect_one(one()) == 7


async def test_collect_one_refuses_an_empty_stream() -> None:
    async def empty() -> AsyncIterator[int]:
        return
        yield

    with pytest.raises(StreamShapeError, match="was empty"):
        await collect_one(empty())


async def test_collect_one_refuses_a_second_item_and_closes_the_stream() -> None:
    closed = False

    async def two() -> AsyncIterator[int]:
        nonlocal closed
        try:
            yield 1
            yield 2
            yield 3
        finally:
            closed = True

    with pytest.raises(StreamShapeError, match="more than one"):
        await collect_one(two())
    assert closed


async def test_collect_one_lets_the_streams_own_error_through() -> None:
    async def broken() -> AsyncIterator[int]:
        yield 1
        raise RuntimeError("tool crashed after its result")

    with pytest.raises(RuntimeError, match="tool crashed"):
        await collect_one(broken())


def test_stream_shape_error_is_a_keel_error() -> None:
    assert issubclass(StreamShapeError, KeelError)
