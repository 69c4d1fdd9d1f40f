"""The default OTLP/HTTP export, against a local collector stand-in: spans and metrics buffered during
the run reach the collector when the kernel shuts down."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.kit import booted, make_root, write

GREETER_TOOL = """
    from core import BaseTool

    class Greeter(BaseTool):
        name = "greeter"

        def greet(self, who):
            return f"hello {who}"
"""


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches on
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def test_buffered_spans_and_metrics_are_exported_on_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector: Collector
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    host, port = collector.server_address[:2]
    monkeypatch.setenv("OTEL_ENABLED", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{host!s}:{port}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")  # nothing leaves before shutdown
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
    root = make_root(tmp_path, tools=("telemetry",))
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    async with booted(root) as kernel:
        kernel.container.get("greeter").greet("collector")
        assert [path for path, _ in collector.received if path == "/v1/traces"] == []
    traces = [body for path, body in collector.received if path == "/v1/traces"]
    metrics = [body for path, body in collector.received if path == "/v1/metrics"]
    span_names = {
        span.name
        for body in traces
        for resource in ExportTraceServiceRequest.FromString(body).resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    metric_names = {
        metric.name
        for body in metrics
        for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert "greeter.greet" in span_names
    assert {"tool_call_total", "tool_call_duration"} <= metric_names
