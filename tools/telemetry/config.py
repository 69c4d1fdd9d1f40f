"""The ``telemetry`` tool's configuration: Keel's switch plus the standard ``OTEL_*`` variables.

Telemetry is opt-in: ``OTEL_ENABLED=true`` turns it on, and the standard kill switch
``OTEL_SDK_DISABLED=true`` wins over it. The rest are OpenTelemetry's own variables, read with the
meanings the OpenTelemetry specification gives them:

======================================  ======================  ==================================
``OTEL_SERVICE_NAME``                   ``keel``                ``service.name`` of the resource
``OTEL_RESOURCE_ATTRIBUTES``            none                    extra resource attributes
``OTEL_TRACES_EXPORTER``                ``otlp``                comma list of otlp, console, memory, none
``OTEL_METRICS_EXPORTER``               ``otlp``                comma list of otlp, console, memory, none
``OTEL_LOGS_EXPORTER``                  ``none``                comma list of otlp, console, memory, none
``OTEL_EXPORTER_OTLP_PROTOCOL``         ``http/protobuf``       or ``grpc`` (needs its exporter package)
``OTEL_EXPORTER_OTLP_ENDPOINT``         ``http://localhost:4318``  read by the OTLP exporters themselves
``OTEL_TRACES_SAMPLER`` (``_ARG``)      ``parentbased_always_on``  the six built-in samplers
``KEEL_TELEMETRY_UNTRACED_TOOLS``       none                    comma list of tools whose calls get no span
======================================  ======================  ==================================

Unlike the SDK, which logs a warning and falls back to a default, a sampler name or argument it does
not know is refused (:class:`TelemetryConfigError`, so the tool is DEAD with the reason): a typo in
a sampling rate should not silently trace everything in production. ``memory`` keeps spans,
metrics and log records in process, where tests read them. Log export is off unless
``OTEL_LOGS_EXPORTER`` asks for it (the specification's default is ``otlp``): every line already
goes to stderr, and a deployment that ships stderr would otherwise get each line twice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import KeelError

EXPORTERS = frozenset({"otlp", "console", "memory", "none"})
PROTOCOLS = frozenset({"http/protobuf", "grpc"})
SAMPLERS = frozenset(
    {
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    }
)
RATIO_SAMPLERS = frozenset({"traceidratio", "parentbased_traceidratio"})
DEFAULT_SERVICE_NAME = "keel"


class TelemetryConfigError(KeelError):
    """An ``OTEL_*`` value the tool will not guess about."""


@dataclass(frozen=True)
class TelemetryConfig:
    enabled: bool
    why_off: str
    traces_exporters: tuple[str, ...] = ("otlp",)
    metrics_exporters: tuple[str, ...] = ("otlp",)
    traces_protocol: str = "http/protobuf"
    metrics_protocol: str = "http/protobuf"
    logs_exporters: tuple[str, ...] = ()
    logs_protocol: str = "http/protobuf"
    sampler: str = "parentbased_always_on"
    sampler_ratio: float = 1.0
    untraced_tools: frozenset[str] = frozenset()


def load_config(environ: Mapping[str, str] = os.environ) -> TelemetryConfig:
    """Read the variables above; raise :class:`TelemetryConfigError` on a value it cannot use."""
    if _flag(environ, "OTEL_SDK_DISABLED"):
        return TelemetryConfig(
            False, "telemetry is off: OTEL_SDK_DISABLED=true (unset it, set OTEL_ENABLED=true)"
        )
    if not _flag(environ, "OTEL_ENABLED"):
        return TelemetryConfig(False, "telemetry is off: set OTEL_ENABLED=true to export traces and metrics")
    general_protocol = _choice(environ, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", PROTOCOLS)
    sampler = _choice(environ, "OTEL_TRACES_SAMPLER", "parentbased_always_on", SAMPLERS)
    return TelemetryConfig(
        enabled=True,
        why_off="",
        traces_exporters=_exporters(environ, "OTEL_TRACES_EXPORTER"),
        metrics_exporters=_exporters(environ, "OTEL_METRICS_EXPORTER"),
        traces_protocol=_choice(environ, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", general_protocol, PROTOCOLS),
        metrics_protocol=_choice(environ, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", general_protocol, PROTOCOLS),
        logs_exporters=_exporters(environ, "OTEL_LOGS_EXPORTER", default="none"),
        logs_protocol=_choice(environ, "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", general_protocol, PROTOCOLS),
        sampler=sampler,
        sampler_ratio=_ratio(environ) if sampler in RATIO_SAMPLERS else 1.0,
        untraced_tools=frozenset(_items(environ.get("KEEL_TELEMETRY_UNTRACED_TOOLS", ""))),
    )


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _items(raw: str) -> list[str]:
    return [item.strip().lower() for item in raw.split(",") if item.strip()]


def _choice(environ: Mapping[str, str], name: str, default: str, allowed: frozenset[str]) -> str:
    value = environ.get(name, "").strip().lower() or default
    if value not in allowed:
        raise TelemetryConfigError(f"{name}={value!r} is not supported; use {', '.join(sorted(allowed))}")
    return value


def _exporters(environ: Mapping[str, str], name: str, default: str = "otlp") -> tuple[str, ...]:
    chosen = _items(environ.get(name, "")) or [default]
    unknown = sorted(set(chosen) - EXPORTERS)
    if unknown:
        raise TelemetryConfigError(
            f"{name} has unknown exporters {unknown}, use {', '.join(sorted(EXPORTERS))}"
        )
    return tuple(dict.fromkeys(e for e in chosen if e != "none"))


def _ratio(environ: Mapping[str, str]) -> float:
    raw = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    if not raw:
        return 1.0
    try:
        ratio = float(raw)
    except ValueError:
        raise TelemetryConfigError(
            f"OTEL_TRACES_SAMPLER_ARG must be a number in [0, 1], not {raw!r}"
        ) from None
    if not 0.0 <= ratio <= 1.0:
        raise TelemetryConfigError(f"OTEL_TRACES_SAMPLER_ARG must be in [0, 1], got {ratio}")
    return ratio
