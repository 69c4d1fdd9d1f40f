"""Building the OpenTelemetry SDK objects from a :class:`~tools.telemetry.config.TelemetryConfig`.

One TracerProvider and one MeterProvider per kernel, with the service resource from
``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` defaults to ``keel`` rather
than the SDK's ``unknown_service``). Exporters: OTLP spans go through a BatchSpanProcessor (export
off the request path, tuned by the standard ``OTEL_BSP_*`` variables); console and memory spans
through a SimpleSpanProcessor, so a test sees a span the moment it ends. OTLP and console metrics
are pushed by a PeriodicExportingMetricReader (``OTEL_METRIC_EXPORT_INTERVAL``); memory metrics are
read on demand from an InMemoryMetricReader. A LoggerProvider is built only when
``OTEL_LOGS_EXPORTER`` asks for one (:mod:`tools.telemetry.log_export`).

The OTLP exporters read their endpoint, headers, timeout and compression from the standard
variables themselves; this module only picks the transport the protocol variable names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    InMemoryMetricReader,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)

from .config import DEFAULT_SERVICE_NAME, TelemetryConfig, TelemetryConfigError


@dataclass
class Providers:
    """What the telemetry tool owns and must flush and shut down."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    memory_exporter: InMemorySpanExporter | None = None
    memory_metric_reader: InMemoryMetricReader | None = None
    logger_provider: Any = None
    memory_log_exporter: Any = None


def build_providers(config: TelemetryConfig) -> Providers:
    resource = build_resource()
    tracer_provider = TracerProvider(sampler=build_sampler(config), resource=resource, shutdown_on_exit=False)
    memory_exporter = None
    for name in config.traces_exporters:
        if name == "otlp":
            tracer_provider.add_span_processor(
                BatchSpanProcessor(_otlp_span_exporter(config.traces_protocol))
            )
        elif name == "console":
            tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        elif name == "memory":
            memory_exporter = InMemorySpanExporter()
            tracer_provider.add_span_processor(SimpleSpanProcessor(memory_exporter))
    readers: list[MetricReader] = []
    memory_reader = None
    for name in config.metrics_exporters:
        if name == "otlp":
            readers.append(PeriodicExportingMetricReader(_otlp_metric_exporter(config.metrics_protocol)))
        elif name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
        elif name == "memory":
            memory_reader = InMemoryMetricReader()
            readers.append(memory_reader)
    meter_provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
    logger_provider, memory_logs = None, None
    if config.logs_exporters:
        from .log_export import build_logger_provider

        logger_provider, memory_logs = build_logger_provider(
            config.logs_exporters, config.logs_protocol, resource
        )
    return Providers(
        tracer_provider, meter_provider, memory_exporter, memory_reader, logger_provider, memory_logs
    )


def build_resource() -> Resource:
    resource = Resource.create({})
    name = str(resource.attributes.get(SERVICE_NAME, ""))
    if not name or name.startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def build_sampler(config: TelemetryConfig) -> Sampler:
    fixed: dict[str, Sampler] = {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "parentbased_always_on": DEFAULT_ON,
        "parentbased_always_off": DEFAULT_OFF,
    }
    if config.sampler in fixed:
        return fixed[config.sampler]
    if config.sampler == "traceidratio":
        return TraceIdRatioBased(config.sampler_ratio)
    return ParentBasedTraceIdRatio(config.sampler_ratio)


def _otlp_span_exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        module = _grpc_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
        exporter: SpanExporter = module.OTLPSpanExporter()
        return exporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _otlp_metric_exporter(protocol: str) -> Any:
    if protocol == "grpc":
        return _grpc_module("opentelemetry.exporter.otlp.proto.grpc.metric_exporter").OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


def _grpc_module(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise TelemetryConfigError(
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the opentelemetry-exporter-otlp-proto-grpc package; "
            "install it or use http/protobuf"
        ) from None
