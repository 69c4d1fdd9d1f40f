"""Configuring the ``llm`` tool: OFF without a server, DEAD on a bad value, the echo provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from core.contracts.errors import ErrorClass, classify
from core.contracts.ports import LLMPort
from core.contracts.types import Message
from core.errors import ServiceUnavailableError
from core.registry import ToolStatus
from tests.kit import booted, bound_tool, make_root, started_tool
from tools.llm.errors import LLMErrorReason, LLMNotConfiguredError
from tools.llm.llm_tool import LlmTool

NOT_CONFIGURED = "LLM not configured: set LLM_BASE_URL"


async def test_without_a_base_url_the_tool_is_off_and_every_call_says_what_to_set(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("llm",))
    async with booted(root) as kernel:
        dump = kernel.registry.get_system_dump()["tools"]["llm"]
        assert dump["status"] == ToolStatus.OFF
        assert dump["message"].startswith(NOT_CONFIGURED)
        llm = kernel.container.get("llm")
        calls: tuple[Callable[[], Awaitable[Any]], ...] = (
            lambda: llm.chat(messages=[Message("user", "hi")], model="m"),
            lambda: llm.complete(system="", user="hi", model="m"),
        )
        for call in calls:
            # The booted kernel imports the tool from its own root, so match on the core base class.
            with pytest.raises(ServiceUnavailableError) as caught:
                await call()
            assert type(caught.value).__name__ == "LLMNotConfiguredError"
            assert str(caught.value).startswith(NOT_CONFIGURED)
        with pytest.raises(ServiceUnavailableError):
            async for _ in llm.stream(messages=[Message("user", "hi")], model="m"):
                pass
        # Calls to an OFF tool never make it DEAD, however many fail.
        assert kernel.registry.tool_status("llm") is ToolStatus.OFF


def test_the_not_configured_error_is_a_permanent_503() -> None:
    error = LLMNotConfiguredError("LLM not configured: set LLM_BASE_URL")
    assert isinstance(error, ServiceUnavailableError)
    assert error.status_code == 503 and error.kind == "unavailable"
    assert error.reason is LLMErrorReason.NOT_CONFIGURED
    assert classify(error) is ErrorClass.PERMANENT


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("LLM_PROVIDER", "anthropic", "LLM_PROVIDER must be one of echo, openai, got 'anthropic'"),
        ("LLM_TIMEOUT_SECONDS", "0", "LLM_TIMEOUT_SECONDS must be a number of seconds, above 0"),
        ("LLM_PRICES", "[1, 2]", "must be a JSON object"),
        ("LLM_PRICES", '{"m": {"input": 1}}', "needs output"),
    ],
)
async def test_an_unusable_value_makes_the_tool_dead_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, fragment: str
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv(name, value)
    root = make_root(tmp_path, tools=("llm",))
    async with booted(root) as kernel:
        dump = kernel.registry.get_system_dump()["tools"]["llm"]
        assert dump["status"] == ToolStatus.DEAD
        assert fragment in dump["message"]
        with pytest.raises(ServiceUnavailableError) as caught:
            await kernel.container.get("llm").chat(messages=[Message("user", "hi")], model="m")
        assert str(caught.value).startswith("LLM misconfigured: ") and fragment in str(caught.value)


async def test_a_price_file_relative_to_the_root_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prices.json").write_text('{"echo": {"input": 1000000, "output": 0}}')
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    monkeypatch.setenv("LLM_PRICES_FILE", "prices.json")
    async with started_tool(LlmTool, tmp_path) as llm:
        result = await llm.chat(messages=[Message("user", "two words")], model="")
    assert result.usage.input_tokens == 2
    assert result.usage.cost_usd == 2.0


async def test_the_echo_provider_is_offline_deterministic_and_says_so_in_the_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    root = make_root(tmp_path, tools=("llm",))
    async with booted(root) as kernel:
        dump = kernel.registry.get_system_dump()["tools"]["llm"]
        assert dump["status"] == ToolStatus.OK
        assert dump["message"].startswith("echo provider: a deterministic offline demo model")
        llm = kernel.container.get("llm")
        assert llm.default_model == "echo"
        deltas = [d async for d in llm.stream(messages=[Message("user", "hello  there")], model="")]
        assert [d.text for d in deltas[:-1]] == ["echo:", " hello", " there"]
        assert deltas[-1].finish_reason == "stop"
        assert deltas[-1].usage is not None and deltas[-1].usage.output_tokens == 3
        again = await llm.chat(messages=[Message("user", "hello  there")], model="")
        assert again.content == "echo: hello there" and again.provider == "echo"
        after_tool = await llm.chat(
            messages=[Message("user", "look it up"), Message("tool", "42", tool_call_id="c")], model=""
        )
        assert after_tool.content == "echo: 42"
        assert kernel.registry.get_metrics()[-1]["tool"] == "llm"  # calls go through the proxy


async def test_the_default_model_is_llm_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    monkeypatch.setenv("LLM_MODEL", "tiny")
    async with started_tool(LlmTool, tmp_path) as llm:
        assert llm.default_model == "tiny"
        result = await llm.complete(system="sys", user="ping", model="")
    assert result.model == "tiny" and result.content == "echo: ping"


def test_an_unset_tool_is_still_an_llm_port(tmp_path: Path) -> None:
    tool = bound_tool(LlmTool, tmp_path)
    assert isinstance(tool, LLMPort)
