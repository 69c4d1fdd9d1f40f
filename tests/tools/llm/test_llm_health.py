"""The llm tool's health check: it asks the server, so a DEAD llm recovers with no chat call."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import started_tool
from tests.tools.llm.openai_server import OpenAIServer
from tools.llm.errors import LLMError, LLMUnavailableError
from tools.llm.llm_tool import LlmTool


async def test_health_follows_the_server(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("LLM_MODEL", "m")
    monkeypatch.setenv("LLM_CONNECT_TIMEOUT_SECONDS", "1")
    async with started_tool(LlmTool, tmp_path) as llm:
        assert await llm.health_check() is True  # any answer below 500 (even a 404) is reachable
        assert server.probes[-1]["path"] == "/v1/models"
        await server.close()
        with pytest.raises(LLMError):  # the pooled connection breaks first
            await llm.health_check()
        with pytest.raises(LLMUnavailableError):  # then nothing listens
            await llm.health_check()


async def test_the_echo_provider_is_always_healthy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "echo")
    async with started_tool(LlmTool, tmp_path) as llm:
        assert await llm.health_check() is True
