"""Building a ``store`` tool outside a kernel: bound to a fresh registry, set up from the environment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from core.registry import Registry
from tools.store.store_tool import StoreTool


def new_store(project_root: Path) -> StoreTool:
    tool = StoreTool()
    registry = Registry()
    registry.register_tool(StoreTool.name)
    tool.bind(project_root=project_root, registry=registry)
    return tool


@asynccontextmanager
async def started_store(project_root: Path) -> AsyncIterator[StoreTool]:
    tool = new_store(project_root)
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()
