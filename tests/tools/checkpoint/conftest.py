"""The ``checkpoints`` fixture: one CheckpointPort per test, for every backend (the contract's parameter).

``reference`` is ``core.state.stores.InMemoryCheckpointStore``; the others are the ``checkpoint``
tool on ``memory://``, a SQLite file and a fresh PostgreSQL schema.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from core.state.stores import InMemoryCheckpointStore
from tests.kit import started_tool
from tests.tools.store.services import postgres_url
from tools.checkpoint.checkpoint_tool import CheckpointTool

TOOL_BACKENDS = ("memory", "sqlite", "postgresql")


@pytest.fixture(autouse=True)
def checkpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("CHECKPOINT_", "DATABASE_URL"))]:
        if name != "DATABASE_URL_TEST":
            monkeypatch.delenv(name)


@asynccontextmanager
async def tool_on(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    service: AbstractAsyncContextManager[Any] = postgres_url() if backend == "postgresql" else nullcontext()
    async with service as url:
        if backend == "memory":
            monkeypatch.setenv("CHECKPOINT_URL", "memory://")
        elif backend == "sqlite":
            monkeypatch.setenv("CHECKPOINT_URL", "sqlite:///data/checkpoints.db")
        else:
            monkeypatch.setenv("CHECKPOINT_URL", url)
        async with started_tool(CheckpointTool, tmp_path) as tool:
            yield tool


@pytest.fixture(params=("reference", *TOOL_BACKENDS))
async def checkpoints(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    if request.param == "reference":
        yield InMemoryCheckpointStore()
        return
    async with tool_on(request.param, tmp_path, monkeypatch) as tool:
        yield tool


@pytest.fixture(params=TOOL_BACKENDS)
async def checkpoint(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """Only the tool's backends (retention and JSON-only states are the tool's promises)."""
    async with tool_on(request.param, tmp_path, monkeypatch) as tool:
        yield tool
