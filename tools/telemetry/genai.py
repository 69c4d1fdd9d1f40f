"""Names from OpenTelemetry's GenAI semantic conventions, for the spans LLM calls will make.

Only names and two small helpers live here, so the LLM tool (a later issue) and agent plugins use
one spelling of each attribute: the span of a model call is named ``"{operation} {model}"``, has
kind CLIENT, and carries ``gen_ai.operation.name``, ``gen_ai.provider.name`` and
``gen_ai.request.model``; token counts go in ``gen_ai.usage.*`` when the response arrives. The
telemetry tool's ``start_genai_span`` builds such a span. Every name comes from
:mod:`core.contracts.genai`, the one place they are spelled (and checked against the
``opentelemetry-semantic-conventions`` package).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.contracts.genai import (
    AGENT_ID,
    AGENT_NAME,
    CONVERSATION_ID,
    METRIC_OPERATION_DURATION,
    METRIC_TOKEN_USAGE,
    OPERATION_CHAT,
    OPERATION_EMBEDDINGS,
    OPERATION_EXECUTE_TOOL,
    OPERATION_INVOKE_AGENT,
    OPERATION_NAME,
    OPERATION_TEXT_COMPLETION,
    PROVIDER_NAME,
    REQUEST_MAX_TOKENS,
    REQUEST_MODEL,
    REQUEST_TEMPERATURE,
    REQUEST_TOP_P,
    RESPONSE_FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    TOOL_CALL_ID,
    TOOL_NAME,
    USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
)

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "CONVERSATION_ID",
    "METRIC_OPERATION_DURATION",
    "METRIC_TOKEN_USAGE",
    "OPERATION_CHAT",
    "OPERATION_EMBEDDINGS",
    "OPERATION_EXECUTE_TOOL",
    "OPERATION_INVOKE_AGENT",
    "OPERATION_NAME",
    "OPERATION_TEXT_COMPLETION",
    "PROVIDER_NAME",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "REQUEST_TEMPERATURE",
    "REQUEST_TOP_P",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "USAGE_INPUT_TOKENS",
    "USAGE_OUTPUT_TOKENS",
    "genai_attributes",
    "genai_span_name",
]


def genai_span_name(operation: str, model: str | None = None) -> str:
    """``"chat gpt-4o"``; just the operation when the model is not known yet."""
    return f"{operation} {model}" if model else operation


def genai_attributes(
    operation: str,
    *,
    model: str | None = None,
    provider: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The starting attributes of a GenAI span (``None`` values left out)."""
    attributes: dict[str, Any] = {OPERATION_NAME: operation}
    if provider is not None:
        attributes[PROVIDER_NAME] = provider
    if model is not None:
        attributes[REQUEST_MODEL] = model
    for key, value in (extra or {}).items():
        if value is not None:
            attributes[key] = value
    return attributes
