"""Every span, metric and log record Keel makes, read back through the in-memory exporters and
checked against OpenTelemetry's HTTP and GenAI semantic conventions: a plugin's request with a
direct ``llm`` call, an agent run whose tool call fails, and an agent run whose model call fails."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.semconv import attributes as stable_attributes
from opentelemetry.semconv._incubating import attributes as incubating_attributes
from opentelemetry.trace import SpanKind, StatusCode

from tests.domains.agents.agents_kit import agents_root, wait_for_status
from tests.kit import serving
from tests.tools.llm.openai_server import OpenAIServer, Reply, text_reply, tool_call_reply

RESERVED = ("gen_ai.", "http.", "url.", "server.", "client.", "network.", "user_agent.", "error.", "code.")

ASK_PLUGIN = """
    from core import BasePlugin


    class AskPlugin(BasePlugin):
        def __init__(self, http, llm, logger):
            self.http, self.llm, self.logger = http, llm, logger

        async def on_boot(self):
            self.http.add_endpoint("/ask", "GET", self.ask)

        async def ask(self, data, context):
            self.logger.info("asking the model directly")
            result = await self.llm.complete(system="", user="direct question", model="")
            return {"answer": result.content}
"""


def known_names() -> set[str]:
    """Every attribute name the semantic-conventions package defines."""
    names: set[str] = set()
    for package in (stable_attributes, incubating_attributes):
        for module_info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            names.update(v for k, v in vars(module).items() if k.isupper() and isinstance(v, str))
    return names


def responder(body: dict[str, Any]) -> Reply:
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "fail the model" in first_user:
        return Reply(status=500, body={"error": {"message": "the model is down"}})
    if not body.get("tools"):
        return text_reply("a direct answer", usage=(9, 3))
    if any(message["role"] == "tool" for message in body["messages"]):
        return text_reply("nothing matched", usage=(60, 15))
    return tool_call_reply([("call_7", "find_products", {"query": ""})], usage=(40, 8))  # the tool refuses ""


@pytest.fixture
async def model_server() -> Any:
    async with OpenAIServer(responder) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_server: OpenAIServer) -> Path:
    monkeypatch.setenv("LLM_BASE_URL", model_server.base_url)
    monkeypatch.setenv("LLM_MODEL", "test-model")
    monkeypatch.setenv("LLM_PRICES", json.dumps({"test-model": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("AGENTS_MODEL_RETRIES", "1")
    monkeypatch.setenv("OTEL_ENABLED", "true")
    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "memory")
    return agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "llm", "telemetry", "logger"),
        scripted_llm=False,
        plugins={"ask_plugin.py": ASK_PLUGIN},
    )


def hexid(value: int, width: int) -> str:
    return f"{value:0{width}x}"


async def test_spans_metrics_and_logs_follow_the_conventions(root: Path, model_server: OpenAIServer) -> None:
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        assert (await client.get("/ask")).json()["answer"] == "a direct answer"
        tool_run = (await client.post("/agents/products/runs", json={"input": "find it"})).json()["id"]
        assert (await wait_for_status(client, tool_run, ["completed", "failed"]))["status"] == "completed"
        failed_run = (await client.post("/agents/products/runs", json={"input": "fail the model"})).json()[
            "id"
        ]
        assert (await wait_for_status(client, failed_run, ["completed", "failed"]))["status"] == "failed"
        telemetry = kernel.container.get("telemetry")
        telemetry.force_flush()
        spans = list(telemetry.memory_exporter.get_finished_spans())
        metrics = telemetry.memory_metric_reader.get_metrics_data()
        logs = list(telemetry.memory_log_exporter.get_finished_logs())

    by_id = {span.context.span_id: span for span in spans}

    def parent(span: Any) -> Any:
        return by_id.get(span.parent.span_id) if span.parent is not None else None

    def named(name: str) -> list[Any]:
        return [span for span in spans if span.name == name]

    # No attribute under a namespace the conventions own that they do not define.
    known = known_names()
    invented = {
        (span.name, key) for span in spans for key in span.attributes or {} if key.startswith(RESERVED)
    } - {(span.name, key) for span in spans for key in span.attributes or {} if key in known}
    assert invented == set()

    # The plugin's request: a SERVER span, and the direct model call its one CLIENT child.
    (ask,) = named("GET /ask")
    assert ask.kind is SpanKind.SERVER and ask.status.status_code is StatusCode.UNSET
    for key in ("http.request.method", "url.path", "url.scheme", "http.route", "http.response.status_code"):
        assert key in ask.attributes, key
    assert "client.address" in ask.attributes and "http.method" not in ask.attributes
    chats = named("chat test-model")
    (direct,) = [chat for chat in chats if parent(chat) is ask]
    assert direct.kind is SpanKind.CLIENT and direct.status.status_code is StatusCode.UNSET
    assert not [s for s in spans if s.name.startswith("llm.")]  # one span per model call
    assert {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "test-model",
        "gen_ai.response.model": "test-model",
        "gen_ai.response.id": "chatcmpl-test",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 9,
        "gen_ai.usage.output_tokens": 3,
    }.items() <= dict(direct.attributes).items()
    assert "server.address" in direct.attributes

    # The run whose tool call fails: invoke_agent CLIENT, its chats and the tool run its children.
    agents = {span.attributes["gen_ai.conversation.id"]: span for span in named("invoke_agent products")}
    ok_agent, failed_agent = agents[tool_run], agents[failed_run]
    assert ok_agent.kind is SpanKind.CLIENT and ok_agent.status.status_code is StatusCode.UNSET
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "products",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "test-model",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 23,
    }.items() <= dict(ok_agent.attributes).items()
    assert len([chat for chat in chats if parent(chat) is ok_agent]) == 2  # the same shape as the direct call
    (tool,) = named("execute_tool find_products")
    assert parent(tool) is ok_agent and tool.kind is SpanKind.INTERNAL
    assert tool.status.status_code is StatusCode.ERROR
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "find_products",
        "gen_ai.tool.call.id": "call_7",
        "gen_ai.tool.type": "function",
        "error.type": "ToolArgumentError",
    }.items() <= dict(tool.attributes).items()

    # The run whose model call fails: ERROR on the chat and on the agent, both with error.type.
    (failed_chat,) = [chat for chat in chats if parent(chat) is failed_agent]
    assert failed_chat.status.status_code is StatusCode.ERROR and "error.type" in failed_chat.attributes
    assert failed_agent.status.status_code is StatusCode.ERROR
    assert failed_agent.attributes["error.type"] == "LLMError"
    assert not [key for key in failed_agent.attributes if key.startswith("gen_ai.usage.")]  # unknown: absent

    # Metrics, with the conventional names and units.
    found = {
        metric.name: metric
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    units = {name: found[name].unit for name in found}
    assert units["gen_ai.client.token.usage"] == "{token}"
    assert units["gen_ai.client.operation.duration"] == "s"
    assert units["http.server.request.duration"] == "s"
    durations = found["gen_ai.client.operation.duration"].data.data_points
    assert any(point.attributes.get("error.type") for point in durations)

    # The log line written in the handler carries the request's trace.
    (line,) = [record for record in logs if record.log_record.body == "asking the model directly"]
    assert hexid(line.log_record.trace_id, 32) == hexid(ask.context.trace_id, 32)
    assert line.log_record.span_id in {
        s.context.span_id for s in spans if s.context.trace_id == ask.context.trace_id
    }
    assert line.log_record.severity_text == "INFO"
