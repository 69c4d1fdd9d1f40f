"""Exporting the process's log records through OpenTelemetry's logs SDK (``OTEL_LOGS_EXPORTER``).

With ``OTEL_LOGS_EXPORTER`` naming ``otlp``, ``console`` or ``memory``, the telemetry tool builds a
``LoggerProvider`` with the service resource and puts an :class:`OtelLogHandler` on the root logger,
so every record of the ``logging`` module (the ``logger`` tool's lines included: it logs through
``logging`` too) becomes an OpenTelemetry log record. Each record carries the context it was logged
in, so the exporter stamps it with the active trace and span ids and a backend joins it to its
trace. OTLP records go through a BatchLogRecordProcessor (off the logging thread, tuned by
``OTEL_BLRP_*``), console and memory ones through a SimpleLogRecordProcessor.

Record fields: ``severity_number`` / ``severity_text`` from the level, ``body`` the formatted
message, ``timestamp`` the record's creation time; attributes ``code.file.path``,
``code.function.name``, ``code.line.number``, ``exception.type`` / ``exception.message`` /
``exception.stacktrace`` when the record carries an exception, and ``keel.identity`` (the plugin
code that logged, as the logger tool names it) when there is one. The logger name is the
instrumentation scope. Records from OpenTelemetry's own loggers are skipped, so an exporter that
logs its failures cannot feed itself.

The SDK's own ``LoggingHandler`` is deprecated (it warns on construction), hence this small one.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.semconv.attributes.code_attributes import (
    CODE_FILE_PATH,
    CODE_FUNCTION_NAME,
    CODE_LINE_NUMBER,
)
from opentelemetry.semconv.attributes.exception_attributes import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
)

from core.context import current_identity_var

from .config import TelemetryConfigError

SEVERITIES = {
    logging.DEBUG: SeverityNumber.DEBUG,
    logging.INFO: SeverityNumber.INFO,
    logging.WARNING: SeverityNumber.WARN,
    logging.ERROR: SeverityNumber.ERROR,
    logging.CRITICAL: SeverityNumber.FATAL,
}
IDENTITY_ATTRIBUTE = "keel.identity"


def build_logger_provider(
    exporters: tuple[str, ...], protocol: str, resource: Resource
) -> tuple[LoggerProvider | None, InMemoryLogRecordExporter | None]:
    """The provider for these exporters (``None`` when there are none) and the memory exporter."""
    if not exporters:
        return None, None
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    memory = None
    for name in exporters:
        if name == "otlp":
            provider.add_log_record_processor(BatchLogRecordProcessor(_otlp_log_exporter(protocol)))
        elif name == "console":
            provider.add_log_record_processor(SimpleLogRecordProcessor(ConsoleLogRecordExporter()))
        elif name == "memory":
            memory = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
            provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    return provider, memory


class OtelLogHandler(logging.Handler):
    """A root-logger handler that emits each record as an OpenTelemetry log record."""

    def __init__(self, provider: LoggerProvider) -> None:
        super().__init__()
        self._provider = provider
        self._loggers: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("opentelemetry"):
            return
        try:
            body = record.getMessage()
        except Exception:
            body = f"{record.msg!r} (unformattable arguments {record.args!r})"
        attributes: dict[str, Any] = {
            CODE_FILE_PATH: record.pathname,
            CODE_FUNCTION_NAME: record.funcName,
            CODE_LINE_NUMBER: record.lineno,
        }
        identity = current_identity_var.get()
        if identity:
            attributes[IDENTITY_ATTRIBUTE] = identity
        if record.exc_info and record.exc_info[0] is not None:
            kind, value, _ = record.exc_info
            attributes[EXCEPTION_TYPE] = kind.__qualname__
            attributes[EXCEPTION_MESSAGE] = str(value)
            attributes[EXCEPTION_STACKTRACE] = "".join(traceback.format_exception(*record.exc_info))
        logger = self._loggers.get(record.name)
        if logger is None:
            logger = self._loggers[record.name] = self._provider.get_logger(record.name)
        logger.emit(
            timestamp=int(record.created * 1e9),
            context=otel_context.get_current(),
            severity_number=SEVERITIES.get(record.levelno, SeverityNumber.UNSPECIFIED),
            severity_text=record.levelname,
            body=body,
            attributes=attributes,
        )


def _otlp_log_exporter(protocol: str) -> Any:
    if protocol == "grpc":
        import importlib

        try:
            module = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc._log_exporter")
        except ImportError:
            raise TelemetryConfigError(
                "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL=grpc needs the opentelemetry-exporter-otlp-proto-grpc "
                "package; install it or use http/protobuf"
            ) from None
        return module.OTLPLogExporter()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

    return OTLPLogExporter()
