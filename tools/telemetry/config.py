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

from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import KeelError
from core.settings import SettingError, env_choice, env_flag, env_float, env_list

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


def load_config(environ: Mapping[str, str] | None = None) -> TelemetryConfig:
    """Read the variables above; raise :class:`TelemetryConfigError` on a value it cannot use."""
    try:
        return _read(environ)
    except SettingError as exc:
        raise TelemetryConfigError(str(exc)) from None


def _read(environ: Mapping[str, str] | None) -> TelemetryConfig:
    if env_flag("OTEL_SDK_DISABLED", environ=environ):
        return TelemetryConfig(
            False, "telemetry is off: OTEL_SDK_DISABLED=true (unset it, set OTEL_ENABLED=true)"
        )
    if not env_flag("OTEL_ENABLED", environ=environ):
        return TelemetryConfig(False, "telemetry is off: set OTEL_ENABLED=true to export traces and metrics")
    general_protocol = env_choice("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", PROTOCOLS, environ=environ)

    def protocol(name: str) -> str:
        return env_choice(name, general_protocol, PROTOCOLS, environ=environ)

    sampler = env_choice("OTEL_TRACES_SAMPLER", "parentbased_always_on", SAMPLERS, environ=environ)
    return TelemetryConfig(
        enabled=True,
        why_off="",
        traces_exporters=_exporters(environ, "OTEL_TRACES_EXPORTER"),
        metrics_exporters=_exporters(environ, "OTEL_METRICS_EXPORTER"),
        traces_protocol=protocol("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
        metrics_protocol=protocol("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"),
        logs_exporters=_exporters(environ, "OTEL_LOGS_EXPORTER", default="none"),
        logs_protocol=protocol("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"),
        sampler=sampler,
        sampler_ratio=_ratio(environ) if sampler in RATIO_SAMPLERS else 1.0,
        untraced_tools=frozenset(env_list("KEEL_TELEMETRY_UNTRACED_TOOLS", lower=True, environ=environ)),
    )


def _exporters(environ: Mapping[str, str] | None, name: str, default: str = "otlp") -> tuple[str, ...]:
    chosen = env_list(name, (default,), lower=True, environ=environ)
    unknown = sorted(set(chosen) - EXPORTERS)
    if unknown:
        raise SettingError(name, ",".join(chosen), f"a list of {', '.join(sorted(EXPORTERS))}")
    return tuple(dict.fromkeys(e for e in chosen if e != "none"))


def _ratio(environ: Mapping[str, str] | None) -> float:
    return env_float("OTEL_TRACES_SAMPLER_ARG", 1.0, minimum=0.0, maximum=1.0, environ=environ)
