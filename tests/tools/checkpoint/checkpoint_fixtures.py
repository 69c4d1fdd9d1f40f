"""Building a ``checkpoint`` tool outside a kernel: bound to a fresh registry, set up from the environment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from core.registry import Registry
from tools.checkpoint.checkpoint_tool import CheckpointTool


def new_checkpoint(project_root: Path) -> CheckpointTool:
    tool = CheckpointTool()
    registry = Registry()
    registry.register_tool(CheckpointTool.name)
    tool.bind(project_root=project_root, registry=registry)
    return tool


@asynccontextmanager
async def started_checkpoint(project_root: Path) -> AsyncIterator[CheckpointTool]:
    tool = new_checkpoint(project_root)
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()
