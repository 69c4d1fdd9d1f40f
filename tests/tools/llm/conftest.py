"""Fixtures for the ``llm`` tool: a local OpenAI-compatible server, and the tool pointed at it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kit import started_tool
from tests.tools.llm.openai_server import OpenAIServer
from tools.llm.llm_tool import LlmTool


@pytest.fixture(autouse=True)
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from an environment with no ``LLM_*`` variable set."""
    for name in [n for n in os.environ if n.startswith("LLM_")]:
        monkeypatch.delenv(name)


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as running:
        yield running


@pytest.fixture
async def llm(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LlmTool]:
    """The tool set up against the local server, with a price for its model."""
    monkeypatch.setenv("LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("LLM_MODEL", "test-model")
    monkeypatch.setenv("LLM_PRICES", '{"test-model": {"input": 1.0, "output": 2.0, "cache_read": 0.5}}')
    async with started_tool(LlmTool, tmp_path) as tool:
        yield tool
