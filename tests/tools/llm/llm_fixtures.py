"""Building an ``llm`` tool outside a kernel: bound to a fresh registry, set up from the environment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from core.registry import Registry
from tools.llm.llm_tool import LlmTool


def new_llm(project_root: Path) -> tuple[LlmTool, Registry]:
    tool = LlmTool()
    registry = Registry()
    registry.register_tool(LlmTool.name)
    tool.bind(project_root=project_root, registry=registry)
    return tool, registry


@asynccontextmanager
async def started_llm(project_root: Path) -> AsyncIterator[LlmTool]:
    tool, _ = new_llm(project_root)
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()
