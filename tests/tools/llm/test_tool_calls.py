"""Reassembling tool calls from stream fragments, including servers whose indexes or ids wander."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.contracts.types import ToolCall
from tools.llm.errors import LLMError, LLMErrorReason
from tools.llm.tool_calls import ToolCallAssembler


def fragment(
    index: int | None = None, call_id: str | None = None, name: str | None = None, args: str = ""
) -> dict[str, Any]:
    entry: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        entry["index"] = index
    if call_id is not None:
        entry["id"] = call_id
    if name is not None:
        entry["function"]["name"] = name
    return entry


def assemble(*fragments: dict[str, Any]) -> tuple[ToolCall, ...]:
    assembler = ToolCallAssembler()
    for each in fragments:
        assembler.add(each)
    return assembler.finish()


def test_openai_style_fragments_by_index() -> None:
    calls = assemble(
        fragment(0, "a", "search", ""),
        fragment(0, args='{"q": '),
        fragment(1, "b", "fetch", '{"url"'),
        fragment(0, args='"x"}'),
        fragment(1, args=': "u"}'),
    )
    assert calls == (ToolCall("a", "search", {"q": "x"}), ToolCall("b", "fetch", {"url": "u"}))


def test_a_new_id_with_a_name_at_a_used_index_is_a_new_call() -> None:
    calls = assemble(fragment(0, "a", "ls", '{"p": 1}'), fragment(0, "b", "ls", '{"p": 2}'))
    assert calls == (ToolCall("a", "ls", {"p": 1}), ToolCall("b", "ls", {"p": 2}))


def test_a_new_id_without_a_name_continues_the_call_and_keeps_its_first_id() -> None:
    calls = assemble(
        fragment(0, "first", "read", ""),
        fragment(0, "second", None, '{"path": '),
        fragment(0, "third", None, '"x"}'),
    )
    assert calls == (ToolCall("first", "read", {"path": "x"}),)


def test_fragments_without_index_follow_their_id_or_the_latest_call() -> None:
    calls = assemble(
        fragment(None, "a", "f", '{"x"'),
        fragment(None, "b", "g", '{"y": 2}'),
        fragment(None, "a", None, ": 1}"),
    )
    assert calls == (ToolCall("a", "f", {"x": 1}), ToolCall("b", "g", {"y": 2}))
    assert assemble(fragment(None, "a", "f", '{"x"'), fragment(args=": 1}")) == (
        ToolCall("a", "f", {"x": 1}),
    )


def test_missing_ids_are_numbered_and_empty_arguments_are_an_empty_object() -> None:
    assert assemble(fragment(0, None, "now"), fragment(1, None, "later", "  ")) == (
        ToolCall("call_0", "now", {}),
        ToolCall("call_1", "later", {}),
    )


def test_decoded_arguments_are_accepted() -> None:
    entry = {"index": 0, "id": "a", "function": {"name": "f", "arguments": {"k": [1, 2]}}}
    assert assemble(entry) == (ToolCall("a", "f", {"k": [1, 2]}),)


@pytest.mark.parametrize(
    ("fragments", "fragment_of_message"),
    [
        ([fragment(0, "a", None, "{}")], "never named its function"),
        ([fragment(0, "a", "f", '{"a": ')], "not valid JSON"),
        ([fragment(0, "a", "f", "[1]")], "must be a JSON object"),
        (["not an object"], "must be an object"),
    ],
)
def test_calls_that_cannot_be_understood_are_refused(fragments: list[Any], fragment_of_message: str) -> None:
    with pytest.raises(LLMError) as caught:
        assemble(*fragments)
    assert caught.value.reason is LLMErrorReason.MALFORMED_RESPONSE
    assert fragment_of_message in str(caught.value)


def test_long_arguments_in_many_pieces() -> None:
    text = json.dumps({"items": list(range(2000))})
    pieces = [fragment(0, "a", "bulk", "")] + [
        fragment(0, args=text[i : i + 3]) for i in range(0, len(text), 3)
    ]
    (call,) = assemble(*pieces)
    assert call.arguments == {"items": list(range(2000))}


def test_finish_empties_the_assembler() -> None:
    assembler = ToolCallAssembler()
    assembler.add(fragment(0, "a", "f"))
    assert assembler
    assembler.finish()
    assert not assembler and assembler.finish() == ()
