"""The kernel's value types: construction, identity hashing, Usage arithmetic, assemble_deltas."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.contracts.types import (
    ChatRequest,
    Delta,
    FinishReason,
    LLMResult,
    Message,
    Operation,
    Prompt,
    Role,
    Scope,
    StreamEvent,
    StreamEventKind,
    ToolCall,
    ToolRequest,
    ToolSchema,
    Usage,
    assemble_deltas,
)
from core.serialization import FrozenDict, FrozenList

# ---- Scope -----------------------------------------------------------------------------------


def test_scope_key_names_org_and_domain_and_the_default_is_the_zero_tenant() -> None:
    assert Scope(org_id=7, domain_id=2).key() == "org7:dom2"
    assert Scope() == Scope(0, 0)
    assert Scope().key() == "org0:dom0"
    assert len({Scope(1, 2), Scope(1, 2), Scope(2, 1)}) == 2


# ---- Usage -----------------------------------------------------------------------------------


def test_usage_addition_rounds_cost_half_to_even_at_six_places() -> None:
    assert (Usage(cost_usd=1.4296875) + Usage()).cost_usd == 1.429688
    # 0.0078125 is an exact binary tie at the seventh place: half-to-even keeps the 2.
    assert (Usage(cost_usd=0.0078125) + Usage()).cost_usd == 0.007812


def test_usage_addition_is_neither_identity_preserving_nor_associative() -> None:
    assert Usage(cost_usd=1.4296875) + Usage() != Usage(cost_usd=1.4296875)
    a, b, c = Usage(cost_usd=0.1), Usage(cost_usd=0.1), Usage(cost_usd=1.5e-6)
    assert ((a + b) + c).cost_usd == 0.200001
    assert (a + (b + c)).cost_usd == 0.200002


def test_total_tokens_counts_every_token_processed() -> None:
    assert Usage(input_tokens=10, output_tokens=5).total_tokens == 15
    assert Usage(10, 5, 100, 20).total_tokens == 135


def test_usages_sum_from_zero_and_refuse_other_operands() -> None:
    usages = [Usage(1, 2, cost_usd=0.5), Usage(3, 4, cost_usd=0.25)]
    assert sum(usages) == Usage(4, 6, cost_usd=0.75)
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        1 + Usage()


token_counts = st.integers(min_value=0, max_value=10**9)
usages = st.builds(
    Usage,
    input_tokens=token_counts,
    output_tokens=token_counts,
    cache_read_tokens=token_counts,
    cache_write_tokens=token_counts,
    cost_usd=st.floats(min_value=0, max_value=1e4, allow_nan=False),
)


@given(usages, usages)
def test_usage_addition_commutes(a: Usage, b: Usage) -> None:
    assert a + b == b + a


@given(usages, usages)
def test_total_tokens_is_additive(a: Usage, b: Usage) -> None:
    assert (a + b).total_tokens == a.total_tokens + b.total_tokens


@given(usages, usages)
def test_an_added_cost_is_already_rounded_to_six_places(a: Usage, b: Usage) -> None:
    total = a + b
    assert round(total.cost_usd, 6) == total.cost_usd
    assert total + Usage() == total
    assert abs(total.cost_usd - (a.cost_usd + b.cost_usd)) <= 5e-7 + 1e-9 * total.cost_usd


@given(usages, usages, usages)
def test_token_counts_add_associatively(a: Usage, b: Usage, c: Usage) -> None:
    left, right = (a + b) + c, a + (b + c)
    assert dataclasses.replace(left, cost_usd=0) == dataclasses.replace(right, cost_usd=0)


# ---- Message, ToolCall, ToolSchema -----------------------------------------------------------


def test_message_and_tool_call_are_positional() -> None:
    message = Message("user", "hi")
    assert (message.role, message.content, message.tool_calls) == ("user", "hi", ())
    call = ToolCall("c1", "lookup_cert", {"host": "example.com"})
    assert (call.id, call.name, call.arguments) == ("c1", "lookup_cert", {"host": "example.com"})
    assert Message(Role.USER, "hi") == message


def test_tool_call_arguments_are_frozen_copied_and_default_to_empty() -> None:
    arguments: dict[str, Any] = {"filters": {"tags": ["marine"]}}
    call = ToolCall("c1", "search", arguments)
    arguments["filters"]["tags"].append("deep")
    assert call.arguments == {"filters": {"tags": ["marine"]}}
    assert type(call.arguments) is FrozenDict
    assert ToolCall("c1", "search").arguments == {}


def test_tool_call_hashes_on_id_and_name_and_compares_everything() -> None:
    first = ToolCall("c1", "search", {"q": ["a"]})
    second = ToolCall("c1", "search", {"q": ["b"]})
    assert hash(first) == hash(second) == hash(("c1", "search"))
    assert first != second
    assert len({first, second, ToolCall("c1", "search", {"q": ["a"]})}) == 2


def test_tool_schema_hashes_on_name_and_description() -> None:
    schema = ToolSchema("search", "web search", {"type": "object", "properties": {"q": {"type": "string"}}})
    other = ToolSchema("search", "web search", {"type": "object"})
    assert hash(schema) == hash(other) == hash(("search", "web search"))
    assert schema != other
    assert type(schema.parameters["properties"]["q"]) is FrozenDict


def test_a_set_of_messages_carrying_tool_calls_works() -> None:
    call = ToolCall("c1", "search", {"q": {"nested": [1]}})
    turns = [
        Message("assistant", tool_calls=(call,)),
        Message("assistant", tool_calls=[call]),
        Message("tool", '{"ok": true}', name="search", tool_call_id="c1"),
        Message("assistant", tool_calls=(ToolCall("c1", "search", {"q": {"nested": [2]}}),)),
    ]
    assert len(set(turns)) == 3
    assert type(turns[1].tool_calls) is tuple


# ---- ChatRequest, ToolRequest, Prompt --------------------------------------------------------


def test_chat_request_freezes_messages_and_tools_and_keeps_none_as_none() -> None:
    request = ChatRequest(messages=[Message("user", "hi")], model="m")
    assert type(request.messages) is FrozenList
    assert request.tools is None and request.response_format is None and request.temperature is None
    with pytest.raises(TypeError):
        request.messages.append(Message("user", "again"))
    empty_tools = ChatRequest(messages=(), model="m", tools=[])
    assert empty_tools.tools == [] and empty_tools.tools is not None
    assert empty_tools != ChatRequest(messages=(), model="m")


def test_chat_request_leaves_cache_hint_untouched() -> None:
    hint = {"provider": ["owned", "object"]}
    request = ChatRequest(messages=[], model="m", cache_hint=hint)
    assert request.cache_hint is hint


def test_chat_request_hashes_on_call_shape_not_transcript() -> None:
    one = ChatRequest([Message("user", "a")], "m", response_format={"type": "object"})
    other = ChatRequest([Message("user", "b")], "m", tools=[ToolSchema("t")])
    assert hash(one) == hash(other) == hash(("m", None, None, 1))
    assert one != other
    longer = ChatRequest([Message("user", "a"), Message("user", "b")], "m")
    assert hash(longer) == hash(("m", None, None, 2))


def test_chat_request_rebuilt_with_replace_shares_the_frozen_transcript() -> None:
    request = ChatRequest([Message("user", "a")], "m")
    swapped = dataclasses.replace(request, model="fallback")
    assert swapped.messages is request.messages and swapped.model == "fallback"


def test_tool_request_hashes_on_routing_fields_and_never_freezes_the_tool() -> None:
    class Tool:
        name = "fetch"
        schema = None

        async def run(self, args: Any, ctx: Any) -> Any:
            return args

    tool = Tool()
    request = ToolRequest("fetch", {"url": "https://x"}, tool=tool, side_effecting=True, url_arg="url")
    assert request.tool is tool
    assert hash(request) == hash(("fetch", True, "url"))
    assert request != ToolRequest(
        "fetch", {"url": "https://y"}, tool=tool, side_effecting=True, url_arg="url"
    )
    assert type(request.arguments) is FrozenDict


def test_prompt_hashes_on_all_four_fields_consistently_with_equality() -> None:
    prompt = Prompt("triage", "3", "Explain {x}", {"x": ["a", {"b": 1}]})
    same = Prompt("triage", "3", "Explain {x}", {"x": ["a", {"b": 1}]})
    assert hash(prompt) == hash(same) and prompt == same
    assert Prompt("triage", "3", "t", {"n": 1}) == Prompt("triage", "3", "t", {"n": 1.0})
    assert hash(Prompt("triage", "3", "t", {"n": 1})) == hash(Prompt("triage", "3", "t", {"n": 1.0}))
    assert len({prompt, Prompt("triage", "4", "Explain {x}", {"x": ["a", {"b": 1}]})}) == 2
    assert type(prompt.inputs["x"]) is FrozenList


# ---- Delta, LLMResult, StreamEvent -----------------------------------------------------------


def test_assemble_deltas_concatenates_text_and_tool_calls_and_takes_the_last_metadata() -> None:
    first_call, second_call = ToolCall("c1", "a", {}), ToolCall("c2", "b", {"x": 1})
    deltas = [
        Delta(text="The ", model="m-1", provider="fake", partial={"t": "The"}),
        Delta(text="answer", tool_calls=(first_call,), usage=Usage(3, 1), partial={"t": "The answer"}),
        Delta(tool_calls=[second_call], finish_reason=FinishReason.TOOL_CALLS, usage=Usage(10, 5), parsed=42),
    ]
    result = assemble_deltas(deltas)
    assert result == LLMResult(
        content="The answer",
        usage=Usage(10, 5),
        tool_calls=(first_call, second_call),
        parsed=42,
        provider="fake",
        model="m-1",
        finish_reason="tool_calls",
    )
    assert not hasattr(result, "partial")


def test_assemble_deltas_of_nothing_is_an_empty_result() -> None:
    assert assemble_deltas([]) == LLMResult()
    assert assemble_deltas(iter([Delta(text="x")])).usage == Usage()


def test_stream_event_partial_output_defaults_to_none() -> None:
    event = StreamEvent(StreamEventKind.MESSAGE_DELTA, text="to")
    assert event.partial_output is None and event.kind == "message_delta"
    kinds = {"message_delta", "tool_call", "tool_result", "step", "interrupt", "final"}
    assert {k.value for k in StreamEventKind} == kinds


def test_operation_names_the_two_kinds_of_work() -> None:
    assert {op.value for op in Operation} == {"model_call", "tool_call"}


def test_every_value_type_refuses_attribute_assignment() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Usage().cost_usd = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ChatRequest([], "m").model = "other"  # type: ignore[misc]
