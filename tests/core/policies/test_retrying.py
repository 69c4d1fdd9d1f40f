"""retry(): transient pre-stream failures only, by classify, sleeping on the injected clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.contracts.errors import ErrorClass
from core.contracts.types import ChatRequest, Delta, Message, ToolRequest
from core.execution.backoff import Backoff
from core.policies import retry
from core.runtime import Invoker
from core.testing import FakeClock, FakeLLM, FakeTool, make_test_ctx

REQUEST = ChatRequest([Message("user", "hi")], "m")


class Permanent(Exception):
    error_class = ErrorClass.PERMANENT


class MidStreamFailure:
    """An LLM whose stream fails after its first delta, every time."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, **_: Any) -> AsyncIterator[Delta]:
        self.calls += 1
        yield Delta(text="partial ")
        raise TimeoutError("connection dropped mid-stream")

    async def chat(self, **_: Any) -> Any:
        raise NotImplementedError

    async def complete(self, **_: Any) -> Any:
        raise NotImplementedError


async def test_retries_transient_failures_before_the_first_delta() -> None:
    clock = FakeClock()
    llm = FakeLLM("ok", fail_times=2, fail_exc=TimeoutError("t"))
    ctx = make_test_ctx(llm=llm, chat_middleware=[retry(max_attempts=3, sleep=clock.sleep)])
    result = await ctx.invoker.chat(REQUEST, ctx)
    assert result.content == "ok" and llm.calls == 3
    assert len(clock.sleeps) == 2 and clock.sleeps[1] > 0


async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    clock = FakeClock()
    llm = FakeLLM("ok", fail_times=5, fail_exc=TimeoutError("still down"))
    ctx = make_test_ctx(llm=llm, chat_middleware=[retry(max_attempts=3, sleep=clock.sleep)])
    with pytest.raises(TimeoutError, match="still down"):
        await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 3 and len(clock.sleeps) == 2


@pytest.mark.parametrize("error", [ValueError("unknown"), Permanent("permanent")])
async def test_does_not_retry_unknown_or_permanent_failures(error: Exception) -> None:
    clock = FakeClock()
    llm = FakeLLM("ok", fail_times=1, fail_exc=error)
    ctx = make_test_ctx(llm=llm, chat_middleware=[retry(max_attempts=3, sleep=clock.sleep)])
    with pytest.raises(type(error)):
        await ctx.invoker.chat(REQUEST, ctx)
    assert llm.calls == 1 and clock.sleeps == []


async def test_never_retries_once_the_stream_has_started() -> None:
    llm = MidStreamFailure()
    clock = FakeClock()
    invoker = Invoker(llm=llm, chat_middleware=[retry(max_attempts=3, sleep=clock.sleep)])
    ctx = make_test_ctx(invoker=invoker)
    received: list[str] = []
    with pytest.raises(TimeoutError, match="mid-stream"):
        async for delta in invoker.stream(REQUEST, ctx):
            received.append(delta.text)
    assert received == ["partial "] and llm.calls == 1 and clock.sleeps == []


async def test_a_custom_classify_decides() -> None:
    def everything_is_transient(exc: BaseException) -> ErrorClass:
        return ErrorClass.TRANSIENT

    clock = FakeClock()
    llm = FakeLLM("ok", fail_times=1, fail_exc=ValueError("normally unknown"))
    chain = [retry(max_attempts=2, sleep=clock.sleep, classify=everything_is_transient)]
    ctx = make_test_ctx(llm=llm, chat_middleware=chain)
    assert (await ctx.invoker.chat(REQUEST, ctx)).content == "ok"


async def test_without_a_sleep_it_waits_on_the_run_clock() -> None:
    clock = FakeClock()
    llm = FakeLLM("ok", fail_times=1)
    backoff = Backoff(base=0.5, jitter=0)
    ctx = make_test_ctx(llm=llm, clock=clock, chat_middleware=[retry(max_attempts=2, backoff=backoff)])
    await ctx.invoker.chat(REQUEST, ctx)
    assert clock.sleeps == [0.5]


async def test_backoff_grows_between_attempts() -> None:
    clock = FakeClock()
    llm = FakeLLM("ok", fail_times=3)
    policy = retry(max_attempts=4, sleep=clock.sleep, backoff=Backoff(base=1, factor=2, jitter=0))
    ctx = make_test_ctx(llm=llm, chat_middleware=[policy])
    await ctx.invoker.chat(REQUEST, ctx)
    assert clock.sleeps == [1, 2, 4] and clock.now() == 7


async def test_records_the_attempts_in_meta() -> None:
    seen: list[Any] = []

    async def spy(call: Any, nxt: Any) -> AsyncIterator[Any]:
        async for item in nxt(call):
            yield item
        seen.append(call.meta.get("attempts"))

    llm = FakeLLM("ok", fail_times=1)
    ctx = make_test_ctx(llm=llm, chat_middleware=[spy, retry(max_attempts=2, sleep=FakeClock().sleep)])
    await ctx.invoker.chat(REQUEST, ctx)
    assert seen == [2]


async def test_retries_tool_calls_too() -> None:
    attempts: list[int] = []

    def flaky(args: dict[str, Any]) -> str:
        attempts.append(1)
        if len(attempts) < 2:
            raise ConnectionError("reset")
        return "ok"

    tool = FakeTool("flaky", responder=flaky)
    ctx = make_test_ctx(llm=FakeLLM(), tool_middleware=[retry(max_attempts=2, sleep=FakeClock().sleep)])
    result = await ctx.invoker.tool(ToolRequest("flaky", {}, tool=tool), ctx)
    assert result == "ok" and len(attempts) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_attempts_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(ValueError):
        retry(max_attempts=bad)
