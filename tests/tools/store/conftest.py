"""The ``store`` fixture: one StorePort per test, for every backend (the contract's parameter).

``reference`` is ``core.state.stores.InMemoryStore`` on a fake clock; the others are the ``store``
tool set up from ``STORE_URL``. ``advance(seconds)`` lets that much time pass for the store: the
fake clock moves at once; the tool's backends read the real clock (Redis expires keys itself), so
for them it waits that long. Expiry is the behaviour under test there, not a synchronisation.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.state.stores import InMemoryStore
from core.testing import FakeClock
from tests.kit import started_tool
from tests.tools.store.services import postgres_url, redis_namespace
from tools.store.store_tool import StoreTool

TOOL_BACKENDS = ("memory", "sqlite", "postgresql", "redis")


@dataclass
class StoreUnderTest:
    store: Any
    backend: str
    advance: Callable[[float], Awaitable[None]]


@pytest.fixture(autouse=True)
def store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("STORE_")]:
        monkeypatch.delenv(name)


@asynccontextmanager
async def tool_store(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StoreUnderTest]:
    """The ``store`` tool on ``backend`` (a fresh database, schema or key prefix)."""
    service: AbstractAsyncContextManager[Any] = nullcontext()
    if backend == "postgresql":
        service = postgres_url()
    elif backend == "redis":
        service = redis_namespace()
    async with service as resource:
        if backend == "memory":
            monkeypatch.setenv("STORE_URL", "memory://")
        elif backend == "sqlite":
            monkeypatch.setenv("STORE_URL", "sqlite:///data/store.db")
        elif backend == "postgresql":
            monkeypatch.setenv("STORE_URL", resource)
        else:
            url, prefix = resource
            monkeypatch.setenv("STORE_URL", url)
            monkeypatch.setenv("STORE_KEY_PREFIX", prefix)
        async with started_tool(StoreTool, tmp_path) as tool:
            yield StoreUnderTest(tool, backend, asyncio.sleep)


@pytest.fixture(params=("reference", *TOOL_BACKENDS))
async def subject(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StoreUnderTest]:
    if request.param == "reference":
        clock = FakeClock()

        async def advance(seconds: float) -> None:
            clock.advance(seconds)

        yield StoreUnderTest(InMemoryStore(clock=clock), "reference", advance)
        return
    async with tool_store(request.param, tmp_path, monkeypatch) as under_test:
        yield under_test


@pytest.fixture(params=TOOL_BACKENDS)
async def tool_subject(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StoreUnderTest]:
    """Only the tool's backends (for what the reference store does not promise: JSON-only values)."""
    async with tool_store(request.param, tmp_path, monkeypatch) as under_test:
        yield under_test
