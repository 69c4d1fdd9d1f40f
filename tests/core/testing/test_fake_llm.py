"""FakeLLM in all its forms: rules, scripts, failure injection, delay, and the port it satisfies."""

from __future__ import annotations

import asyncio

import pytest

from core.contracts.ports import LLMPort
from core.contracts.types import Message, ToolCall, ToolSchema, Usage
from core.testing import DEFAULT_USAGE, FakeLLM, ScriptExhausted, Turn

HI = [Message("user", "hi")]


def test_satisfies_the_port() -> None:
    assert isinstance(FakeLLM(), LLMPort) and isinstance(FakeLLM.script([Turn("x")]), LLMPort)


async def test_a_string_answers_every_call_with_default_usage() -> None:
    llm = FakeLLM("plain")
    for _ in range(3):
        result = await llm.chat(messages=HI, model="m")
        assert (result.content, result.provider, result.model, result.finish_reason) == (
            "plain",
            "fake",
            "m",
            "stop",
        )
        assert result.usage == DEFAULT_USAGE == Usage(10, 5, cost_usd=0.0001)
    assert llm.calls == 3
    assert (await llm.complete(system="s", user="u", model="m")).content == "plain"


async def test_the_default_answer_is_braces() -> None:
    assert (await FakeLLM().chat(messages=HI, model="m")).content == "{}"


async def test_a_dict_matches_substrings_of_the_last_user_message_first_key_first() -> None:
    llm = FakeLLM({"cert": "about certs", "deploy": "about deploys"})
    transcript = [
        Message("user", "tell me about the deploy"),
        Message("assistant", "sure"),
        Message("user", "and the cert on that deploy?"),
    ]
    assert (await llm.chat(messages=transcript, model="m")).content == "about certs"
    assert (await llm.chat(messages=[Message("user", "deploy")], model="m")).content == "about deploys"
    assert (await llm.complete(system="", user="nothing", model="m")).content == "{}"


async def test_a_callable_gets_system_user_and_model() -> None:
    seen: list[tuple[str, str, str]] = []

    def responder(*, system: str, user: str, model: str) -> str:
        seen.append((system, user, model))
        return "ok"

    llm = FakeLLM(responder)
    messages = [Message("system", "one"), Message("system", "two"), Message("user", "q")]
    await llm.chat(messages=messages, model="gpt")
    await llm.complete(system="s", user="u", model="m2")
    assert seen == [("one\n\ntwo", "q", "gpt"), ("s", "u", "m2")]


async def test_stream_sends_chunks_then_a_terminal_delta() -> None:
    llm = FakeLLM("abcdefghij", chunk_size=4)
    deltas = [d async for d in llm.stream(messages=HI, model="m")]
    assert [d.text for d in deltas] == ["abcd", "efgh", "ij", ""]
    assert all(d.provider == "fake" and d.model == "m" for d in deltas)
    assert deltas[-1].usage == DEFAULT_USAGE and deltas[-1].finish_reason == "stop"
    assert all(d.usage is None for d in deltas[:-1])
    with pytest.raises(ValueError):
        FakeLLM(chunk_size=0)


async def test_a_script_answers_turn_by_turn() -> None:
    call = ToolCall("c1", "lookup", {"q": "x"})
    own_usage = Usage(1, 2, cost_usd=0.5)
    llm = FakeLLM.script([Turn(tool_calls=[call]), Turn(content="done", usage=own_usage)])
    first = await llm.chat(messages=HI, model="m")
    assert first.tool_calls == (call,) and first.finish_reason == "tool_calls" and first.content == ""
    assert first.usage == DEFAULT_USAGE
    second = await llm.chat(messages=HI, model="m")
    assert (second.content, second.finish_reason, second.usage) == ("done", "stop", own_usage)
    assert llm.turns_used == 2


async def test_a_script_that_runs_out_raises_a_base_exception_naming_the_counts() -> None:
    llm = FakeLLM.script([Turn("one"), Turn("two")])
    await llm.chat(messages=HI, model="m")
    await llm.chat(messages=HI, model="m")
    with pytest.raises(ScriptExhausted) as info:
        await llm.chat(messages=HI, model="m")
    message = str(info.value)
    assert "has 2 turn(s), but the agent asked for turn 3" in message and "repeat_last=True" in message
    assert issubclass(ScriptExhausted, BaseException) and not issubclass(ScriptExhausted, Exception)


async def test_an_empty_script_raises_at_once_even_with_repeat_last() -> None:
    with pytest.raises(ScriptExhausted, match="has 0 turn"):
        await FakeLLM.script([], repeat_last=True).chat(messages=HI, model="m")


async def test_repeat_last_replays_the_final_turn_and_keeps_counting() -> None:
    llm = FakeLLM.script([Turn("one"), Turn("two")], repeat_last=True)
    answers = [(await llm.chat(messages=HI, model="m")).content for _ in range(4)]
    assert answers == ["one", "two", "two", "two"] and llm.turns_used == 4


async def test_fail_times_raises_before_the_first_delta_and_spares_the_script() -> None:
    llm = FakeLLM.script([Turn("first"), Turn("second")], fail_times=2, fail_exc=ConnectionError("down"))
    for _ in range(2):
        stream = llm.stream(messages=HI, model="m")
        with pytest.raises(ConnectionError):
            await anext(stream)
    assert (await llm.chat(messages=HI, model="m")).content == "first"
    assert llm.calls == 3 and llm.turns_used == 1


async def test_the_default_failure_is_a_timeout() -> None:
    with pytest.raises(TimeoutError):
        await FakeLLM("x", fail_times=1).chat(messages=HI, model="m")
    with pytest.raises(TimeoutError):
        await FakeLLM("x", fail_times=1).complete(system="", user="", model="m")


async def test_complete_ignores_the_script() -> None:
    llm = FakeLLM.script([Turn("scripted")])
    assert (await llm.complete(system="s", user="u", model="m")).content == "{}"
    assert llm.turns_used == 0


async def test_tools_are_ignored() -> None:
    llm = FakeLLM("same")
    with_tools = await llm.chat(messages=HI, model="m", tools=[ToolSchema("search")])
    assert with_tools.content == "same" and with_tools.tool_calls == ()


async def test_delay_is_a_real_sleep_that_can_be_cancelled() -> None:
    llm = FakeLLM("late", delay=30)
    task = asyncio.create_task(llm.chat(messages=HI, model="m"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert llm.calls == 0  # the call never got past its delay
    quick = FakeLLM("soon", delay=0.001)
    assert (await quick.chat(messages=HI, model="m")).content == "soon"


def test_turn_defaults_and_tuple_tool_calls() -> None:
    turn = Turn()
    assert (turn.content, turn.tool_calls, turn.usage) == ("", (), None)
    assert Turn(tool_calls=[ToolCall("c", "t")]).tool_calls == (ToolCall("c", "t"),)
