"""The ``event_bus`` fixture: a fresh in-process bus per test, shut down afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tools.event_bus.event_bus_tool import EventBusTool


@pytest.fixture
async def event_bus(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[EventBusTool]:
    monkeypatch.delenv("EVENT_BUS_URL", raising=False)
    monkeypatch.delenv("EVENT_TRACE_BUFFER", raising=False)
    monkeypatch.delenv("EVENT_BUS_MAX_ATTEMPTS", raising=False)
    monkeypatch.setenv("EVENT_BUS_RETRY_BACKOFF_MS", "1")  # retries as on Redis, without the wait
    bus = EventBusTool()
    await bus.setup()
    yield bus
    await bus.shutdown()
