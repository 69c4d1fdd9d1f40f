"""The echo model's scripted tool calls: a message naming an offered tool gets a call to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.contracts.types import Message, Role, ToolCall, ToolSchema
from tests.kit import started_tool
from tools.llm.echo_tools import scripted_tool_call
from tools.llm.llm_tool import LlmTool

FIND = ToolSchema(
    "find_products",
    "Search the catalogue.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
PAGE = ToolSchema(
    "list_orders",
    "Orders, a page at a time.",
    {
        "type": "object",
        "properties": {
            "status": {"type": "string"},
            "limit": {"type": "integer"},
            "paid": {"type": "boolean"},
        },
    },
)
TOOLS = (FIND, PAGE)


def user(text: str) -> list[Message]:
    return [Message(Role.SYSTEM, "be brief"), Message(Role.USER, text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "find_products: walnut keyboard?",
            ToolCall("echo-call-1", "find_products", {"query": "walnut keyboard"}),
        ),
        (
            'use find_products {"query": "desk"} please',
            ToolCall("echo-call-1", "find_products", {"query": "desk"}),
        ),
        ('find_products query="oak desk"', ToolCall("echo-call-1", "find_products", {"query": "oak desk"})),
        (
            "list_orders status=open limit=3 paid=true",
            ToolCall("echo-call-1", "list_orders", {"status": "open", "limit": 3, "paid": True}),
        ),
        ("list_orders limit=many", ToolCall("echo-call-1", "list_orders", {"limit": "many"})),
        ("list_orders", ToolCall("echo-call-1", "list_orders", {})),
        ("list_orders then find_products lamp", ToolCall("echo-call-1", "list_orders", {})),
    ],
)
def test_a_message_naming_a_tool_calls_it_with_arguments_from_the_message(
    text: str, expected: ToolCall
) -> None:
    call = scripted_tool_call(user(text), TOOLS)
    assert call == expected and dict(call.arguments) == dict(expected.arguments)


@pytest.mark.parametrize(
    "messages",
    [
        user("what is in stock?"),  # names no tool
        user("find_products_fast lamp"),  # a longer word, not the tool's name
        [*user("find_products lamp"), Message(Role.TOOL, "[]", name="find_products", tool_call_id="c")],
    ],
)
def test_no_call_without_a_named_tool_or_after_a_tool_result(messages: list[Message]) -> None:
    assert scripted_tool_call(messages, TOOLS) is None


def test_no_call_when_no_tools_are_offered() -> None:
    assert scripted_tool_call(user("find_products lamp"), None) is None
    assert scripted_tool_call(user("find_products lamp"), ()) is None


def test_the_call_id_counts_the_tool_calling_turns() -> None:
    first = ToolCall("echo-call-1", "find_products", {"query": "lamp"})
    messages = [
        *user("find_products lamp"),
        Message(Role.ASSISTANT, "", tool_calls=(first,)),
        Message(Role.TOOL, "[]", name="find_products", tool_call_id="echo-call-1"),
        Message(Role.USER, "find_products desk"),
    ]
    call = scripted_tool_call(messages, TOOLS)
    assert call is not None and call.id == "echo-call-2"


async def test_the_echo_provider_calls_the_tool_then_echoes_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    async with started_tool(LlmTool, tmp_path) as llm:
        asked = await llm.chat(messages=user("find_products lamp"), model="", tools=TOOLS)
        assert asked.content == "" and asked.finish_reason == "tool_calls"
        assert [(c.id, c.name, dict(c.arguments)) for c in asked.tool_calls] == [
            ("echo-call-1", "find_products", {"query": "lamp"})
        ]
        transcript = [
            *user("find_products lamp"),
            Message(Role.ASSISTANT, "", tool_calls=asked.tool_calls),
            Message(Role.TOOL, '[{"sku": "L-1"}]', name="find_products", tool_call_id="echo-call-1"),
        ]
        answered = await llm.chat(messages=transcript, model="", tools=TOOLS)
        assert answered.content == 'echo: [{"sku": "L-1"}]' and not answered.tool_calls
        plain = await llm.chat(messages=user("hello there"), model="", tools=TOOLS)
        assert plain.content == "echo: hello there" and not plain.tool_calls
