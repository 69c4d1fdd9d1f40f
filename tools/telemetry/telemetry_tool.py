"""The ``telemetry`` tool: OpenTelemetry tracing and metrics for the whole kernel, or no-ops.

Off unless ``OTEL_ENABLED=true`` (see :mod:`tools.telemetry.config` for every variable). Off, or
with the OpenTelemetry packages missing, the tool is OFF and :meth:`TelemetryTool.get_tracer` and
:meth:`TelemetryTool.get_meter` hand out no-op objects, so plugin code traces unconditionally.

On, ``setup()`` builds a TracerProvider and a MeterProvider with the service resource, and
``on_boot_complete`` wires them into the kernel:

* a span factory on the Container, so every proxied tool call is a ``<tool>.<method>`` span
  (:mod:`tools.telemetry.tool_spans`); the telemetry tool's own methods and any tool listed in
  ``KEEL_TELEMETRY_UNTRACED_TOOLS`` get none;
* ``on_instrument(tracer_provider[, meter_provider])`` on every raw tool that defines it (the
  meter provider is passed when the hook takes a second parameter; the http tool puts its
  server-span middleware in front of its routes there, so each request is a server span and the
  tool calls in its handler are its children); a hook that fails is logged and that tool simply
  runs uninstrumented — never DEAD;
* a registry metrics sink feeding ``tool_call_total`` and ``tool_call_duration``
  (:mod:`tools.telemetry.call_metrics`);
* with ``OTEL_LOGS_EXPORTER`` set, a root-logger handler exporting every log record, with its
  trace and span ids, through the logs SDK (:mod:`tools.telemetry.log_export`; from ``setup()``).

The providers are also installed as OpenTelemetry's global providers when none is set yet, so
libraries that call ``opentelemetry.trace.get_tracer`` export through them; the global can be set
only once per process, so in a process that boots several kernels (a test suite) later kernels
use their own providers explicitly. ``shutdown()`` detaches everything and flushes what is
buffered. ``memory_exporter``, ``memory_metric_reader`` and ``memory_log_exporter`` are set when
the ``memory`` exporters are chosen, for tests to read.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from core import BaseTool, ToolNotConfiguredError

from .config import TelemetryConfig, load_config
from .noop import NoOpMeter, NoOpTracer

if TYPE_CHECKING:
    from core import Container

    from .call_metrics import CallMetrics
    from .providers import Providers
    from .tool_spans import ToolSpanFactory

log = logging.getLogger("keel.telemetry")

DEFAULT_SCOPE = "keel"
TOOL_CALL_SCOPE = "keel.toolproxy"


class TelemetryTool(BaseTool):
    """OpenTelemetry tracers and meters; a span on every tool call when OTEL_ENABLED=true."""

    name = "telemetry"

    def __init__(self) -> None:
        self._config: TelemetryConfig | None = None
        self._providers: Providers | None = None
        self._call_metrics: CallMetrics | None = None
        self._span_factory: ToolSpanFactory | None = None
        self._container: Container | None = None
        self.tracer_provider: Any = None
        self.meter_provider: Any = None
        self.memory_exporter: Any = None
        self.memory_metric_reader: Any = None
        self.memory_log_exporter: Any = None
        self._log_handler: Any = None

    async def setup(self) -> None:
        config = load_config()
        self._config = config
        if not config.enabled:
            raise ToolNotConfiguredError(config.why_off)
        try:
            from .providers import build_providers
        except ImportError as exc:
            raise ToolNotConfiguredError(
                f"telemetry is off: OTEL_ENABLED=true but the OpenTelemetry SDK cannot be imported ({exc}); "
                "install opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http"
            ) from None
        providers = build_providers(config)
        self._providers = providers
        self.tracer_provider = providers.tracer_provider
        self.meter_provider = providers.meter_provider
        self.memory_exporter = providers.memory_exporter
        self.memory_metric_reader = providers.memory_metric_reader
        self.memory_log_exporter = providers.memory_log_exporter
        _install_globals(providers)
        if providers.logger_provider is not None:
            from .log_export import OtelLogHandler

            self._log_handler = OtelLogHandler(providers.logger_provider)
            logging.getLogger().addHandler(self._log_handler)
        log.info(
            "telemetry on: traces to %s, metrics to %s, logs to %s, sampler %s",
            ", ".join(config.traces_exporters) or "nowhere",
            ", ".join(config.metrics_exporters) or "nowhere",
            ", ".join(config.logs_exporters) or "nowhere",
            config.sampler,
        )

    async def on_boot_complete(self, container: Container) -> None:
        providers = self._providers
        if providers is None or self._config is None:
            return
        from .call_metrics import CallMetrics
        from .tool_spans import ToolSpanFactory

        raw_tools = container.get_raw_tools()
        self._container = container
        self._span_factory = ToolSpanFactory(
            providers.tracer_provider.get_tracer(TOOL_CALL_SCOPE),
            raw_tools,
            self._config.untraced_tools | {self.name},
        )
        container.register_span_factory(self._span_factory)
        self._call_metrics = CallMetrics(providers.meter_provider.get_meter(TOOL_CALL_SCOPE))
        self.kernel_registry.add_metrics_sink(self._call_metrics.sink)
        self._call_metrics.start()
        await _instrument_tools(raw_tools, providers.tracer_provider, providers.meter_provider)

    async def shutdown(self) -> None:
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler = None
        container, factory, metrics = self._container, self._span_factory, self._call_metrics
        if container is not None and factory is not None and container.span_factory is factory:
            container.register_span_factory(None)
        if metrics is not None:
            self.kernel_registry.remove_metrics_sink(metrics.sink)
            await asyncio.to_thread(metrics.stop)
        providers = self._providers
        if providers is not None:
            await asyncio.to_thread(_close, providers)
        self._container = self._span_factory = self._call_metrics = self._providers = None

    # -- what plugins use -----------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Whether spans and metrics are really recorded (False: every object handed out is a no-op).

        A property so that asking goes through the ToolProxy without counting as a successful call.
        """
        return self._providers is not None

    def get_tracer(self, name: str = DEFAULT_SCOPE, version: str | None = None) -> Any:
        """A tracer for instrumentation scope ``name``; a no-op tracer when telemetry is off."""
        if self._providers is None:
            return _noop_tracer()
        return self._providers.tracer_provider.get_tracer(name, version)

    def get_meter(self, name: str = DEFAULT_SCOPE, version: str | None = None) -> Any:
        """A meter for instrumentation scope ``name``; a no-op meter when telemetry is off."""
        if self._providers is None:
            return _noop_meter(name)
        return self._providers.meter_provider.get_meter(name, version)

    def start_genai_span(
        self,
        operation: str,
        *,
        model: str | None = None,
        provider: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> AbstractContextManager[Any]:
        """A current CLIENT span for an LLM call, named and tagged per the GenAI semantic conventions."""
        from .genai import genai_attributes, genai_span_name

        tracer = self.get_tracer("keel.genai")
        span_attributes = genai_attributes(operation, model=model, provider=provider, extra=attributes)
        if self._providers is None:
            return tracer.start_as_current_span(genai_span_name(operation, model))  # type: ignore[no-any-return]
        from opentelemetry.trace import SpanKind

        return tracer.start_as_current_span(  # type: ignore[no-any-return]
            genai_span_name(operation, model), kind=SpanKind.CLIENT, attributes=span_attributes
        )

    def span_kind(self, kind: str) -> Any:
        """OpenTelemetry's ``SpanKind`` named ``kind`` (``"client"``, ``"server"``, ``"producer"``,
        ``"consumer"``, ``"internal"``); INTERNAL for any other name. ``None`` when telemetry is off."""
        if self._providers is None:
            return None
        from opentelemetry.trace import SpanKind

        return getattr(SpanKind, kind.upper(), SpanKind.INTERNAL)

    def error_status(self, description: str = "") -> Any:
        """The ERROR status to set on a failed span (``None`` when telemetry is off)."""
        if self._providers is None:
            return None
        from opentelemetry.trace import Status, StatusCode

        return Status(StatusCode.ERROR, description or None)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Record pending tool-call metrics and push buffered spans and metrics to the exporters now."""
        if self._providers is None:
            return True
        if self._call_metrics is not None:
            self._call_metrics.drain()
        spans = self._providers.tracer_provider.force_flush(timeout_millis)
        metrics = self._providers.meter_provider.force_flush(timeout_millis)
        logs = self._providers.logger_provider
        logged = logs.force_flush(timeout_millis) if logs is not None else True
        return bool(spans and metrics and logged)


async def _instrument_tools(raw_tools: Mapping[str, Any], tracer_provider: Any, meter_provider: Any) -> None:
    for name, tool in sorted(raw_tools.items()):
        hook = getattr(tool, "on_instrument", None)
        if not callable(hook):
            continue
        try:
            takes_meter = len(inspect.signature(hook).parameters) >= 2
            result = hook(tracer_provider, meter_provider) if takes_meter else hook(tracer_provider)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("tool %s: on_instrument() failed; it keeps working, without its own spans", name)


def _install_globals(providers: Providers) -> None:
    from opentelemetry import metrics, trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(providers.tracer_provider)
    # The metrics API hands out its proxy until a provider is set, and has no public "is it set" query.
    if type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        metrics.set_meter_provider(providers.meter_provider)


def _close(providers: Providers) -> None:
    owned: list[tuple[str, Any]] = [
        ("tracer", providers.tracer_provider),
        ("meter", providers.meter_provider),
    ]
    if providers.logger_provider is not None:
        owned.append(("logger", providers.logger_provider))
    for name, provider in owned:
        try:
            provider.force_flush()
            provider.shutdown()
        except Exception:
            log.exception("telemetry: shutting the %s provider down failed", name)


def _noop_tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return NoOpTracer()
    return trace.NoOpTracer()


def _noop_meter(name: str) -> Any:
    try:
        from opentelemetry import metrics
    except ImportError:
        return NoOpMeter()
    return metrics.NoOpMeter(name)
