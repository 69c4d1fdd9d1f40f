"""SchemaAdapter's four shapes (pydantic, dataclass, attrs, raw JSON Schema) and the bounded re-ask."""

from __future__ import annotations

import dataclasses

import attrs
import pytest
from pydantic import BaseModel

from core.agents import Agent, OutputTypeError, ReActCognition, StopReason
from core.agents.output import SchemaAdapter
from core.testing import FakeLLM, FakeTool, Turn, make_test_ctx


@attrs.define
class Ticket:
    title: str
    priority: int = attrs.field(validator=attrs.validators.instance_of(int))
    tags: list[str] = attrs.Factory(list)


class Article(BaseModel):
    title: str
    body: str


@dataclasses.dataclass
class Point:
    x: int
    y: int


SCHEMA = {
    "title": "verdict",
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "score": {"type": ["number", "null"]}},
    "required": ["ok"],
}


def test_attrs_class_is_advertised_parsed_and_built_partially() -> None:
    adapter = SchemaAdapter(Ticket)
    schema = adapter.response_format()["json_schema"]["schema"]
    assert schema["required"] == ["title", "priority"]
    assert schema["properties"]["priority"] == {"type": "integer"}
    assert adapter.parse('{"title": "t", "priority": 2}') == Ticket("t", 2)
    with pytest.raises(TypeError):
        adapter.parse('{"title": "t", "priority": "high"}')  # attrs' own validator ran
    partial = adapter.partial('{"title": "Disk fu')
    assert getattr(partial, "title", None) == "Disk fu" and getattr(partial, "priority", None) is None


def test_a_raw_json_schema_checks_required_members_and_primitive_types() -> None:
    adapter = SchemaAdapter(SCHEMA)
    assert adapter.response_format() == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": SCHEMA},
    }
    assert adapter.parse('{"ok": true, "score": null}') == {"ok": True, "score": None}
    with pytest.raises(ValueError, match="missing required member 'ok'"):
        adapter.parse('{"score": 1}')
    with pytest.raises(ValueError, match="member 'ok' should be boolean, got int"):
        adapter.parse('{"ok": 1}')
    assert adapter.partial('{"ok": tr') == {}  # a half-written literal is not a field yet
    assert SchemaAdapter(SCHEMA).partial('{"ok": true, "sc') == {"ok": True}


def test_pydantic_and_dataclass_keep_working_and_other_types_are_refused() -> None:
    assert SchemaAdapter(Article).parse('{"title": "a", "body": "b"}') == Article(title="a", body="b")
    assert SchemaAdapter(Point).parse('```json\n{"x": 1, "y": 2}\n```') == Point(1, 2)
    with pytest.raises(OutputTypeError, match="attrs class"):
        SchemaAdapter(int)


async def test_a_bad_answer_is_re_asked_with_the_validation_error() -> None:
    seen: list[str] = []
    answers = iter(['{"x": 1}', '{"x": 1, "y": 2}'])

    def responder(*, system: str, user: str, model: str) -> str:
        seen.append(user)
        return next(answers)

    llm = FakeLLM(responder)
    result = await Agent("a", model="m", output_type=Point, output_retries=2).run(
        "where?", make_test_ctx(llm=llm)
    )
    assert result.parsed == Point(1, 2) and llm.calls == 2 and result.model_calls == 2
    assert "could not be used: TypeError" in seen[1] and "'y'" in seen[1]
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_re_asking_is_bounded_and_then_the_run_stops_as_invalid_output() -> None:
    llm = FakeLLM("not json")
    result = await Agent("a", model="m", output_type=Point, output_retries=2).run(
        "go", make_test_ctx(llm=llm)
    )
    assert result.reason is StopReason.INVALID_OUTPUT and llm.calls == 3


async def test_without_output_retries_one_bad_answer_still_stops_the_run() -> None:
    llm = FakeLLM("not json")
    result = await Agent("a", model="m", output_type=Point).run("go", make_test_ctx(llm=llm))
    assert result.reason is StopReason.INVALID_OUTPUT and llm.calls == 1


async def test_a_react_loop_re_asks_at_its_final_answer() -> None:
    llm = FakeLLM.script([Turn(content="done!"), Turn(content='{"x": 3, "y": 4}')])
    agent = Agent(
        "a", model="m", output_type=Point, output_retries=1, cognition=ReActCognition(tools=[FakeTool("t")])
    )
    result = await agent.run("go", make_test_ctx(llm=llm))
    assert result.parsed == Point(3, 4)


def test_output_retries_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="output_retries"):
        Agent("a", model="m", output_retries=-1)
