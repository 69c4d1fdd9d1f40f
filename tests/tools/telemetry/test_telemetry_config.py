"""Which ``OTEL_*`` settings turn telemetry on, and which the tool refuses instead of guessing."""

from __future__ import annotations

import pytest

from tools.telemetry.config import TelemetryConfigError, load_config


def test_off_unless_enabled() -> None:
    config = load_config({})
    assert not config.enabled
    assert "set OTEL_ENABLED=true" in config.why_off
    assert not load_config({"OTEL_ENABLED": "no"}).enabled


def test_the_sdk_kill_switch_wins() -> None:
    config = load_config({"OTEL_ENABLED": "true", "OTEL_SDK_DISABLED": "true"})
    assert not config.enabled
    assert "OTEL_SDK_DISABLED" in config.why_off


def test_defaults_when_on() -> None:
    config = load_config({"OTEL_ENABLED": "1"})
    assert config.enabled
    assert config.traces_exporters == ("otlp",) and config.metrics_exporters == ("otlp",)
    assert config.traces_protocol == config.metrics_protocol == "http/protobuf"
    assert (config.sampler, config.sampler_ratio) == ("parentbased_always_on", 1.0)


def test_exporter_lists_and_per_signal_protocols() -> None:
    config = load_config(
        {
            "OTEL_ENABLED": "true",
            "OTEL_TRACES_EXPORTER": "console, memory,memory",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
            "KEEL_TELEMETRY_UNTRACED_TOOLS": "logger, Cache",
        }
    )
    assert config.traces_exporters == ("console", "memory")
    assert config.metrics_exporters == ()
    assert (config.traces_protocol, config.metrics_protocol) == ("grpc", "http/protobuf")
    assert config.untraced_tools == frozenset({"logger", "cache"})


def test_ratio_samplers_read_their_argument() -> None:
    config = load_config(
        {
            "OTEL_ENABLED": "true",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
        }
    )
    assert (config.sampler, config.sampler_ratio) == ("parentbased_traceidratio", 0.25)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER must be one of .*, got 'sometimes'"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, "must be a number"),
        (
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"},
            "OTEL_TRACES_SAMPLER_ARG must be a number between 0 and 1, got '1.5'",
        ),
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER must be a list of .*, got 'jaeger'"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL must be one of"),
    ],
)
def test_values_it_cannot_use_are_refused(variables: dict[str, str], message: str) -> None:
    with pytest.raises(TelemetryConfigError, match=message):
        load_config({"OTEL_ENABLED": "true", **variables})


def test_logs_are_exported_only_when_asked() -> None:
    on = {"OTEL_ENABLED": "true"}
    assert load_config(on).logs_exporters == ()
    asked = load_config(
        {**on, "OTEL_LOGS_EXPORTER": "otlp,memory", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc"}
    )
    assert (asked.logs_exporters, asked.logs_protocol) == (("otlp", "memory"), "grpc")
    with pytest.raises(TelemetryConfigError, match="OTEL_LOGS_EXPORTER"):
        load_config({**on, "OTEL_LOGS_EXPORTER": "syslog"})
