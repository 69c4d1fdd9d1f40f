"""The example agent of the agents domain (``product_assistant``) on its own, with a fake model."""

from __future__ import annotations

from typing import Any

from core.agents import Agent, ReActCognition
from core.contracts.types import ToolCall
from core.testing import FakeLLM, Turn, make_test_ctx
from domains.agents.plugins.product_assistant import FindProducts


async def test_the_example_agent_answers_from_the_database_with_fake_llm() -> None:
    class Db:
        def __init__(self) -> None:
            self.queries: list[tuple[str, list[Any]]] = []

        async def query(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
            self.queries.append((sql, params))
            return [{"sku": "LP-330", "name": "Desk lamp", "price_cents": 3900, "stock": 25}]

    db = Db()
    llm = FakeLLM.script(
        [
            Turn(tool_calls=[ToolCall("c1", "find_products", {"query": " Lamp "})]),
            Turn("The desk lamp is 39 euros."),
        ]
    )
    agent = Agent("products", "fake", ReActCognition([FindProducts(db)]))
    result = await agent.run("How much is the lamp?", make_test_ctx(llm=llm))
    assert result.output == "The desk lamp is 39 euros."
    assert db.queries[0][1] == ["%lamp%", 10]
    tool_message = [m for m in result.messages if m.role == "tool"][0]
    assert '"price_eur": 39.0' in tool_message.content
    blank = await agent.run(
        "?",
        make_test_ctx(
            llm=FakeLLM.script([Turn(tool_calls=[ToolCall("c", "find_products", {})]), Turn("ok")])
        ),
    )
    assert "error: ToolArgumentError: query must be a non-empty string" in blank.messages[-2].content
