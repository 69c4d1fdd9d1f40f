"""The whole service against a local OpenAI-compatible server: HTTP -> agent -> llm tool -> server
-> SSE back, with the example product assistant, metrics and (with telemetry on) GenAI spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.domains.agents.agents_kit import agents_root, collect_events, wait_for_status
from tests.kit import serving
from tests.tools.llm.openai_server import OpenAIServer, Reply, text_reply, tool_call_reply

ANSWER = "The walnut keyboard costs 149 euros and 12 are in stock."


def assistant(body: dict[str, Any]) -> Reply:
    """Look the product up first; answer once a tool result is in the transcript."""
    if any(message["role"] == "tool" for message in body["messages"]):
        return text_reply(ANSWER, pieces=4, usage=(60, 15))
    return tool_call_reply([("call_1", "find_products", {"query": "walnut"})], usage=(40, 8))


@pytest.fixture
async def model_server() -> Any:
    async with OpenAIServer(assistant) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_server: OpenAIServer) -> Path:
    monkeypatch.setenv("LLM_BASE_URL", model_server.base_url)
    monkeypatch.setenv("LLM_MODEL", "test-model")
    monkeypatch.setenv("LLM_PRICES", json.dumps({"test-model": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("OTEL_ENABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "memory")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "memory")
    return agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "llm", "telemetry", "logger", "system"),
        scripted_llm=False,
        domains=("system",),
    )


async def test_a_run_against_an_openai_compatible_server(root: Path, model_server: OpenAIServer) -> None:
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (
            await client.post("/agents/products/runs", json={"input": "How much is the walnut keyboard?"})
        ).json()["id"]
        events = await collect_events(client, run_id)
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed", body
        assert body["output"] == ANSWER
        assert body["usage"]["input_tokens"] == 100 and body["usage"]["output_tokens"] == 23
        assert body["cost_usd"] == "0.000146"  # 100 in at $1/M + 23 out at $2/M
        assert "".join(e["data"]["text"] for e in events if e["event"] == "message_delta") == ANSWER
        (result,) = [e["data"]["result"] for e in events if e["event"] == "tool_result"]
        assert result[0]["sku"] == "KB-101"

        first, second = (request["json"] for request in model_server.requests)
        assert first["model"] == "test-model" and first["stream"] is True
        assert [t["function"]["name"] for t in first["tools"]] == ["find_products"]
        assert first["messages"][0]["role"] == "system"
        tool_message = second["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
        assert json.loads(tool_message["content"])[0]["name"] == "Walnut keyboard"

        metrics = (await client.get("/system/metrics", params={"limit": "1000"})).json()
        summary = metrics["summary"]
        assert summary["llm.stream"]["count"] == 2 and summary["llm.stream"]["errors"] == 0
        assert summary["db.query"]["count"] >= 1
        assert summary["checkpoint.save"]["count"] == 4

        spans = kernel.container.get("telemetry").memory_exporter.get_finished_spans()
        by_name: dict[str, list[Any]] = {}
        for span in spans:
            by_name.setdefault(span.name, []).append(span)
        (agent_span,) = by_name["invoke_agent products"]
        assert agent_span.attributes["gen_ai.agent.name"] == "products"
        assert agent_span.attributes["keel.agent.stop_reason"] == "completed"
        chats = by_name["chat test-model"]
        assert len(chats) == 2
        assert all(
            chat.parent is not None and chat.parent.span_id == agent_span.context.span_id for chat in chats
        )
        assert chats[0].attributes["gen_ai.usage.input_tokens"] == 40
        (tool_span,) = by_name["execute_tool find_products"]
        assert tool_span.parent is not None and tool_span.parent.span_id == agent_span.context.span_id
        assert any(
            s.name == "db.query" and s.parent.span_id == tool_span.context.span_id for s in spans if s.parent
        )


async def test_a_model_server_error_fails_the_run_with_its_reason(
    root: Path, model_server: OpenAIServer
) -> None:
    model_server.enqueue(Reply(status=401, body={"error": {"message": "bad key"}}))
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/products/runs", json={"input": "hi"})).json()["id"]
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "failed" and body["reason"] == "error"
        assert body["error"] == "LLMError: the model server answered 401: bad key (check LLM_API_KEY)"


async def test_a_transient_error_before_the_first_token_is_retried(
    root: Path, model_server: OpenAIServer
) -> None:
    model_server.enqueue(
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"retry-after": "0"})
    )
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        run_id = (await client.post("/agents/products/runs", json={"input": "walnut?"})).json()["id"]
        body = await wait_for_status(client, run_id, ["completed", "failed"])
        assert body["status"] == "completed" and body["model_calls"] == 2
        assert len(model_server.requests) == 3
