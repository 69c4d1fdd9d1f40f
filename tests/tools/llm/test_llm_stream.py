"""The ``llm`` tool against a local server speaking the real chat-completions wire format."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.contracts.errors import ErrorClass, classify
from core.contracts.ports import LLMPort
from core.contracts.types import ChatRequest, Delta, FinishReason, Message, ToolCall, ToolSchema, Usage
from core.policies import retry
from core.testing import make_test_ctx
from tests.kit import started_tool
from tests.tools.llm.openai_server import OpenAIServer, Reply, chunk, text_reply, tool_call_reply, usage_chunk
from tools.llm.errors import (
    LLMError,
    LLMErrorReason,
    LLMRateLimitedError,
    LLMStreamInterrupted,
    LLMUnavailableError,
)
from tools.llm.llm_tool import LlmTool

HELLO = [Message("user", "hello")]


async def collect(llm: LlmTool, **kwargs: object) -> list[Delta]:
    return [delta async for delta in llm.stream(messages=kwargs.pop("messages", HELLO), model="", **kwargs)]  # type: ignore[arg-type]


async def test_the_tool_satisfies_the_port(llm: LlmTool) -> None:
    assert isinstance(llm, LLMPort)


async def test_text_arrives_as_it_is_streamed_then_the_finish_and_the_usage(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(text_reply("Hello there, friend", pieces=3, usage=(12, 7)))
    deltas = await collect(llm)
    texts = [d.text for d in deltas if d.text]
    assert "".join(texts) == "Hello there, friend"
    assert len(texts) == 3
    assert deltas[-2].finish_reason == FinishReason.STOP
    assert deltas[-1].usage == Usage(input_tokens=12, output_tokens=7, cost_usd=0.000026)
    assert {d.model for d in deltas} == {"test-model"}
    assert {d.provider for d in deltas} == {"openai"}


async def test_the_request_is_openais_streaming_shape(llm: LlmTool, server: OpenAIServer) -> None:
    weather = ToolSchema(
        "weather", "Today's weather", {"type": "object", "properties": {"city": {"type": "string"}}}
    )
    transcript = [
        Message("system", "Be brief."),
        Message("user", "Weather in Oslo?"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "weather", {"city": "Oslo"})]),
        Message("tool", "sunny", name="weather", tool_call_id="c1"),
    ]
    await collect(llm, messages=transcript, tools=[weather], temperature=0.2, max_tokens=50)
    body = server.requests[-1]["json"]
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2 and body["max_tokens"] == 50
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Today's weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
    ]
    assert "response_format" not in body


async def test_no_tools_sends_no_tools_key_and_the_api_key_is_a_bearer_token(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("LLM_API_KEY", "sk-test")
    monkeypatch.setenv("LLM_STREAM_USAGE", "false")
    async with started_tool(LlmTool, tmp_path) as llm:
        deltas = await collect(llm, tools=None)
    request = server.requests[-1]
    assert "tools" not in request["json"] and "stream_options" not in request["json"]
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["json"]["model"] == "default"  # neither the call nor LLM_MODEL named one
    assert all(d.usage is None for d in deltas)  # without the usage chunk there is none to report


async def test_tool_calls_are_accumulated_and_emitted_whole_with_the_finish(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(
        tool_call_reply(
            [("call_a", "search", {"q": "octopus", "k": 3}), ("call_b", "fetch", {"url": "https://x.org"})]
        )
    )
    deltas = await collect(llm)
    with_calls = [d for d in deltas if d.tool_calls]
    assert len(with_calls) == 1
    assert with_calls[0].finish_reason == FinishReason.TOOL_CALLS
    assert with_calls[0].tool_calls == (
        ToolCall("call_a", "search", {"q": "octopus", "k": 3}),
        ToolCall("call_b", "fetch", {"url": "https://x.org"}),
    )
    assert deltas[-1].usage is not None and deltas[-1].usage.output_tokens == 9


async def test_parallel_calls_all_numbered_zero_are_told_apart_by_id(
    llm: LlmTool, server: OpenAIServer
) -> None:
    def call(call_id: str, name: str, arguments: str) -> dict[str, object]:
        return {
            "index": 0,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    server.enqueue(
        Reply(
            [
                chunk(tool_calls=[call("a", "ls", '{"path": "/"}')]),
                chunk(tool_calls=[call("b", "ls", '{"path": "/tmp"}')]),
                chunk(finish_reason="tool_calls"),
            ]
        )
    )
    result = await llm.chat(messages=HELLO, model="")
    assert result.tool_calls == (ToolCall("a", "ls", {"path": "/"}), ToolCall("b", "ls", {"path": "/tmp"}))


async def test_chat_equals_the_collected_stream_and_complete_sends_system_and_user(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(text_reply("forty-two", usage=(5, 2)))
    result = await llm.chat(messages=HELLO, model="test-model")
    assert result.content == "forty-two"
    assert result.finish_reason == "stop"
    assert result.usage.total_tokens == 7
    assert result.provider == "openai" and result.model == "test-model"
    server.enqueue(text_reply("brief"))
    answer = await llm.complete(system="Be brief.", user="Explain.", model="")
    assert answer.content == "brief"
    assert server.requests[-1]["json"]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Explain."},
    ]


async def test_cached_prompt_tokens_are_counted_and_priced_as_cache_reads(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(Reply([chunk(content="ok"), chunk(finish_reason="stop"), usage_chunk(100, 10, cached=40)]))
    result = await llm.chat(messages=HELLO, model="")
    # 60 uncached at $1/M, 40 cached at $0.5/M, 10 output at $2/M
    assert result.usage == Usage(input_tokens=60, output_tokens=10, cache_read_tokens=40, cost_usd=0.0001)


async def test_keep_alive_comments_and_a_missing_final_blank_line_are_fine(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(
        Reply(
            [
                b": keep-alive\n\n",
                chunk(content="a"),
                b": PROCESSING\n\n",
                chunk(content="b"),
                chunk(finish_reason="stop"),
            ],
            done=False,
        ),
    )
    result = await llm.chat(messages=HELLO, model="")
    assert result.content == "ab" and result.finish_reason == "stop"


async def test_a_429_before_the_first_delta_is_transient_and_keeps_the_retry_hint(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(Reply(status=429, body={"error": {"message": "slow down"}}, headers={"retry-after": "2"}))
    with pytest.raises(LLMRateLimitedError) as caught:
        await collect(llm)
    assert caught.value.retry_after == 2.0
    assert "slow down" in str(caught.value)
    assert classify(caught.value) is ErrorClass.TRANSIENT


async def test_retry_repeats_a_pre_stream_429_and_the_second_attempt_answers(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(Reply(status=429, body={"error": {"message": "slow down"}}), text_reply("made it"))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    ctx = make_test_ctx(llm=llm, chat_middleware=[retry(3, sleep=sleep)])
    result = await ctx.invoker.chat(ChatRequest(messages=HELLO, model="test-model"), ctx)
    assert result.content == "made it"
    assert len(server.requests) == 2 and len(slept) == 1


@pytest.mark.parametrize(
    ("status", "reason", "verdict"),
    [
        (500, LLMErrorReason.SERVER_ERROR, ErrorClass.TRANSIENT),
        (503, LLMErrorReason.SERVER_ERROR, ErrorClass.TRANSIENT),
        (408, LLMErrorReason.TIMEOUT, ErrorClass.TRANSIENT),
        (400, LLMErrorReason.BAD_REQUEST, ErrorClass.PERMANENT),
        (401, LLMErrorReason.AUTHENTICATION, ErrorClass.PERMANENT),
        (403, LLMErrorReason.FORBIDDEN, ErrorClass.PERMANENT),
        (404, LLMErrorReason.BAD_REQUEST, ErrorClass.PERMANENT),
    ],
)
async def test_error_statuses_are_classified(
    llm: LlmTool, server: OpenAIServer, status: int, reason: LLMErrorReason, verdict: ErrorClass
) -> None:
    server.enqueue(Reply(status=status, body={"error": {"message": "nope", "type": "x"}}))
    with pytest.raises(LLMError) as caught:
        await collect(llm)
    assert caught.value.reason is reason
    assert caught.value.status_code == status
    assert classify(caught.value) is verdict
    assert not isinstance(caught.value, LLMStreamInterrupted)


async def test_a_disconnect_mid_stream_is_reported_as_an_interrupted_stream(
    llm: LlmTool, server: OpenAIServer
) -> None:
    words = [chunk(content=word) for word in ("one ", "two ", "three ")]
    server.enqueue(Reply([chunk(role="assistant"), *words, chunk(finish_reason="stop")], disconnect_after=3))
    received: list[str] = []
    with pytest.raises(LLMStreamInterrupted) as caught:
        async for delta in llm.stream(messages=HELLO, model=""):
            received.append(delta.text)
    assert received == ["one ", "two "]
    assert caught.value.deltas_received == 2
    assert caught.value.cause.reason is LLMErrorReason.CONNECTION
    assert "after 2 delta(s)" in str(caught.value)


async def test_a_disconnect_after_the_finish_loses_only_the_usage(
    llm: LlmTool, server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    reply = text_reply("complete answer")
    reply.disconnect_after = len(reply.events) - 1  # everything but the usage chunk, then the line drops
    server.enqueue(reply)
    result = await llm.chat(messages=HELLO, model="")
    assert result.content == "complete answer" and result.finish_reason == "stop"
    assert result.usage == Usage()
    assert "connection broke after the answer finished" in caplog.text


async def test_a_disconnect_before_any_delta_is_an_ordinary_transient_error(
    llm: LlmTool, server: OpenAIServer
) -> None:
    reply = text_reply("never arrives")
    reply.disconnect_after = 1  # only the role chunk, which carries nothing
    server.enqueue(reply)
    with pytest.raises(LLMError) as caught:
        await collect(llm)
    assert not isinstance(caught.value, LLMStreamInterrupted)
    assert caught.value.reason is LLMErrorReason.CONNECTION
    assert classify(caught.value) is ErrorClass.TRANSIENT


async def test_a_stream_that_ends_cleanly_without_a_finish_or_done_is_incomplete(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(Reply([chunk(content="partial")], done=False))
    with pytest.raises(LLMStreamInterrupted) as caught:
        await collect(llm)
    assert caught.value.cause.reason is LLMErrorReason.CONNECTION


async def test_a_malformed_chunk_first_is_a_malformed_response(llm: LlmTool, server: OpenAIServer) -> None:
    server.enqueue(Reply(["{not json", chunk(content="x"), chunk(finish_reason="stop")]))
    with pytest.raises(LLMError) as caught:
        await collect(llm)
    assert caught.value.reason is LLMErrorReason.MALFORMED_RESPONSE
    assert classify(caught.value) is ErrorClass.PERMANENT
    assert "{not json" in str(caught.value)


async def test_a_malformed_chunk_after_text_interrupts_the_stream(llm: LlmTool, server: OpenAIServer) -> None:
    server.enqueue(Reply([chunk(content="fine so far"), "[1, 2", chunk(finish_reason="stop")]))
    with pytest.raises(LLMStreamInterrupted) as caught:
        await collect(llm)
    assert caught.value.cause.reason is LLMErrorReason.MALFORMED_RESPONSE
    assert classify(caught.value) is ErrorClass.PERMANENT


async def test_an_error_object_inside_the_stream_is_a_server_error(
    llm: LlmTool, server: OpenAIServer
) -> None:
    server.enqueue(Reply([{"error": {"message": "overloaded", "type": "server_error"}}]))
    with pytest.raises(LLMError) as caught:
        await collect(llm)
    assert caught.value.reason is LLMErrorReason.SERVER_ERROR and "overloaded" in str(caught.value)


async def test_tool_call_arguments_that_are_not_json_are_refused(llm: LlmTool, server: OpenAIServer) -> None:
    head = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": '}}
    server.enqueue(Reply([chunk(tool_calls=[head]), chunk(finish_reason="tool_calls")]))
    with pytest.raises(LLMError) as caught:
        await collect(llm)
    assert caught.value.reason is LLMErrorReason.MALFORMED_RESPONSE
    assert "'f'" in str(caught.value)


async def test_a_server_that_stops_answering_times_out(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("LLM_TIMEOUT_SECONDS", "0.2")
    gate = asyncio.Event()  # never set: the server goes quiet before its first chunk
    server.enqueue(Reply([chunk(content="late")], gate=gate))
    async with started_tool(LlmTool, tmp_path) as llm:
        with pytest.raises(LLMError) as caught:
            await collect(llm)
    assert caught.value.reason is LLMErrorReason.TIMEOUT
    assert classify(caught.value) is ErrorClass.TRANSIENT
    gate.set()


async def test_an_unreachable_server_is_a_tool_unavailable_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with OpenAIServer() as gone:
        url = gone.base_url
    monkeypatch.setenv("LLM_BASE_URL", url)
    async with started_tool(LlmTool, tmp_path) as llm:
        with pytest.raises(LLMUnavailableError) as caught:
            await collect(llm)
    assert classify(caught.value) is ErrorClass.TRANSIENT


async def test_a_consumer_that_stops_early_closes_the_stream(llm: LlmTool, server: OpenAIServer) -> None:
    server.enqueue(text_reply("a b c d e f", pieces=6))
    stream = llm.stream(messages=HELLO, model="")
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert first.text
    server.enqueue(text_reply("again"))
    assert (await llm.chat(messages=HELLO, model="")).content == "again"  # the pool is still usable
