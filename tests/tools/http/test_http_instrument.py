"""on_instrument: every request becomes an OpenTelemetry span once telemetry hands over a provider."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.tools.http.http_kit import client, make_http


async def test_requests_are_traced_after_instrumentation(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def item(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return data

    http.add_endpoint("/items/{item_id}", "GET", item)
    async with client(http) as c:
        assert (await c.get("/items/1")).status_code == 200  # builds the stack before instrumenting
        await http.on_instrument(provider)
        response = await c.get("/items/2", headers={"X-Request-ID": "traced-1"})
    assert response.json() == {"item_id": "2"}
    assert response.headers["x-request-id"] == "traced-1"
    routes = [(s.attributes or {}).get("http.route") for s in exporter.get_finished_spans()]
    assert [route for route in routes if route] == ["/items/{item_id}"]
    provider.shutdown()
