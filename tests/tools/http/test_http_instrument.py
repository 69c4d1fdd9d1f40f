"""on_instrument: every request becomes an OpenTelemetry span once telemetry hands over a provider."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util.types import AnyValue, Attributes

from tests.tools.http.http_kit import client, make_http


class _Attributed(Protocol):
    @property
    def attributes(self) -> Attributes: ...


def attrs(recorded: _Attributed) -> Mapping[str, AnyValue]:
    """A finished span's or data point's attributes: typed optional, always set once recorded."""
    assert recorded.attributes is not None
    return recorded.attributes


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


async def test_server_spans_follow_the_stable_http_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])

    async def item(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        if data["item_id"] == "boom":
            raise RuntimeError("handler failed")
        return data

    http.add_endpoint("/items/{item_id}", "GET", item)
    await http.on_instrument(provider, meters)
    parent_trace = "0af7651916cd43dd8448eb211c80319c"
    async with client(http) as c:
        ok = await c.get(
            "/items/2?x=1",
            headers={"traceparent": f"00-{parent_trace}-b7ad6b7169203331-01", "User-Agent": "probe/1"},
        )
        missing = await c.get("/nowhere")
        failed = await c.get("/items/boom")
    assert (ok.status_code, missing.status_code, failed.status_code) == (200, 404, 500)
    spans = {attrs(span)["url.path"]: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"/items/2", "/nowhere", "/items/boom"}  # one span per request, no extras
    span = spans["/items/2"]
    assert span.name == "GET /items/{item_id}"
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.UNSET
    assert f"{span.context.trace_id:032x}" == parent_trace  # continues the caller's trace
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b7ad6b7169203331"
    assert dict(attrs(span)) == {
        "http.request.method": "GET",
        "url.scheme": "http",
        "url.path": "/items/2",
        "url.query": "x=1",
        "network.protocol.version": "1.1",
        "client.address": "127.0.0.1",
        "client.port": 123,
        "server.address": "keel.test",
        "user_agent.original": "probe/1",
        "http.route": "/items/{item_id}",
        "http.response.status_code": 200,
    }
    not_found = spans["/nowhere"]
    assert not_found.name == "GET"  # no route matched: the method only, never the raw path
    assert not_found.status.status_code is StatusCode.UNSET  # a 4xx is not the server's error
    assert "error.type" not in attrs(not_found) and "http.route" not in attrs(not_found)
    boom = spans["/items/boom"]
    assert boom.status.status_code is StatusCode.ERROR
    assert attrs(boom)["http.response.status_code"] == 500
    assert attrs(boom)["error.type"] in ("RuntimeError", "500")
    data = reader.get_metrics_data()
    assert data is not None
    (metric,) = [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
    assert (metric.name, metric.unit) == ("http.server.request.duration", "s")
    points = {attrs(point).get("http.response.status_code"): point for point in metric.data.data_points}
    assert set(points) == {200, 404, 500}
    assert attrs(points[200])["http.route"] == "/items/{item_id}"
    assert "url.path" not in attrs(points[200])  # high-cardinality attributes stay off metrics
    assert attrs(points[500])["error.type"] == attrs(boom)["error.type"]
    provider.shutdown()
    meters.shutdown()
