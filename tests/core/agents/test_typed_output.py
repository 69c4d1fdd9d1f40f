"""Typed outputs: ``parsed`` on the result, tolerant ``partial_output`` while the answer streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from core.agents import Agent, OutputTypeError, StopReason
from core.agents.output import OutputSpec
from core.contracts.middleware import Call, Handler
from core.contracts.types import ChatRequest, StreamEventKind
from core.testing import FakeLLM, make_test_ctx

ANSWER = '{"title": "Octopus cognition", "body": "Eight arms, one mind."}'


class Article(BaseModel):
    title: str
    body: str


@dataclass(frozen=True)
class Note:
    title: str
    body: str
    tags: list[str] | None = None


async def test_a_pydantic_output_is_parsed_strictly() -> None:
    ctx = make_test_ctx(llm=FakeLLM(ANSWER))
    result = await Agent("w", model="m", output_type=Article).run("write", ctx)
    assert result.parsed == Article(title="Octopus cognition", body="Eight arms, one mind.")
    assert result.output == ANSWER and not result.stopped


async def test_a_dataclass_output_is_parsed_and_a_fenced_answer_is_accepted() -> None:
    ctx = make_test_ctx(llm=FakeLLM(f"Here you go:\n```json\n{ANSWER}\n```"))
    result = await Agent("w", model="m", output_type=Note).run("write", ctx)
    assert result.parsed == Note("Octopus cognition", "Eight arms, one mind.")


async def test_a_dict_output_is_the_json_object() -> None:
    result = await Agent("w", model="m", output_type=dict).run("x", make_test_ctx(llm=FakeLLM('{"a": 1}')))
    assert result.parsed == {"a": 1}


@pytest.mark.parametrize("output_type", [Article, Note])
async def test_the_unmatched_braces_answer_is_parseable_json_but_not_a_valid_object(output_type: Any) -> None:
    # FakeLLM's "{}" fallback parses as JSON, so the failure is a clear result rather than a crash.
    ctx = make_test_ctx(llm=FakeLLM({"never": "matched"}))
    result = await Agent("w", model="m", output_type=output_type).run("write", ctx)
    assert result.stopped and result.reason is StopReason.INVALID_OUTPUT
    assert result.parsed is None and result.output == "{}" and result.error


async def test_prose_instead_of_json_is_invalid_output() -> None:
    ctx = make_test_ctx(llm=FakeLLM("I cannot do that."))
    result = await Agent("w", model="m", output_type=Article).run("write", ctx)
    assert result.reason is StopReason.INVALID_OUTPUT and "not valid JSON" in (result.error or "")


async def test_pydantic_partials_report_which_fields_have_arrived() -> None:
    ctx = make_test_ctx(llm=FakeLLM(ANSWER, chunk_size=6))
    agent = Agent("w", model="m", output_type=Article)
    partials = [
        e.partial_output
        async for e in agent.stream("write", ctx)
        if e.kind == StreamEventKind.MESSAGE_DELTA and e.partial_output is not None
    ]
    assert partials, "a typed stream produces partials"
    assert all(isinstance(p, Article) for p in partials)
    first_with_title = next(p for p in partials if "title" in p.model_fields_set)
    assert "body" not in first_with_title.model_fields_set
    titles = [p.title for p in partials if "title" in p.model_fields_set]
    assert titles[-1] == "Octopus cognition" and all("Octopus cognition".startswith(t) for t in titles)
    assert partials[-1].model_fields_set == {"title", "body"}
    assert partials[-1].body == "Eight arms, one mind."


async def test_a_partial_is_only_stamped_when_it_changed() -> None:
    ctx = make_test_ctx(llm=FakeLLM('{"title": "x"}     ', chunk_size=1))
    events = [e async for e in Agent("w", model="m", output_type=Article).stream("write", ctx)]
    deltas = [e for e in events if e.kind == StreamEventKind.MESSAGE_DELTA]
    stamped = [e.partial_output for e in deltas if e.partial_output is not None]
    assert len(stamped) < len(deltas)
    assert deltas[-1].partial_output is None  # trailing spaces change nothing


async def test_dataclass_partials_leave_unarrived_fields_absent() -> None:
    ctx = make_test_ctx(llm=FakeLLM(ANSWER, chunk_size=6))
    partials = [
        e.partial_output
        async for e in Agent("w", model="m", output_type=Note).stream("write", ctx)
        if e.partial_output is not None
    ]
    early = next(p for p in partials if getattr(p, "title", None) is not None)
    assert isinstance(early, Note)
    with pytest.raises(AttributeError):
        _ = early.body
    assert getattr(early, "body", None) is None
    assert partials[-1].body == "Eight arms, one mind."


async def test_the_request_advertises_the_schema() -> None:
    requests: list[ChatRequest] = []

    async def capture(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        assert isinstance(call.request, ChatRequest)
        requests.append(call.request)
        async for item in nxt(call):
            yield item

    ctx = make_test_ctx(llm=FakeLLM(ANSWER), chat_middleware=[capture])
    await Agent("w", model="m", output_type=Article).run("write", ctx)
    await Agent("w", model="m", output_type=Note).run("write", ctx)
    await Agent("w", model="m").run("write", ctx)
    pydantic_format, dataclass_format, plain = (r.response_format for r in requests)
    assert pydantic_format is not None and pydantic_format["json_schema"]["name"] == "Article"
    assert pydantic_format["json_schema"]["schema"]["required"] == ["title", "body"]
    assert dataclass_format == {
        "type": "json_schema",
        "json_schema": {
            "name": "Note",
            "schema": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                    "tags": {"anyOf": [{"type": "array"}, {"type": "null"}]},
                },
                "required": ["title", "body"],
            },
        },
    }
    assert plain is None
    assert OutputSpec(dict).response_format() == {"type": "json_object"}


@pytest.mark.parametrize("bad", [str, int, list, "Article", object()])
def test_an_unsupported_output_type_is_refused_when_the_agent_is_built(bad: Any) -> None:
    with pytest.raises(OutputTypeError):
        Agent("w", model="m", output_type=bad)
