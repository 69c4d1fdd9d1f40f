"""Names from OpenTelemetry's GenAI semantic conventions, for the spans LLM calls will make.

Only names and two small helpers live here, so the LLM tool (a later issue) and agent plugins use
one spelling of each attribute: the span of a model call is named ``"{operation} {model}"``, has
kind CLIENT, and carries ``gen_ai.operation.name``, ``gen_ai.provider.name`` and
``gen_ai.request.model``; token counts go in ``gen_ai.usage.*`` when the response arrives. The
telemetry tool's ``start_genai_span`` builds such a span. Every name is the
``opentelemetry-semantic-conventions`` package's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_ID as AGENT_ID,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_NAME as AGENT_NAME,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_CONVERSATION_ID as CONVERSATION_ID,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_OPERATION_NAME as OPERATION_NAME,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_PROVIDER_NAME as PROVIDER_NAME,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_REQUEST_MAX_TOKENS as REQUEST_MAX_TOKENS,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_REQUEST_MODEL as REQUEST_MODEL,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_REQUEST_TEMPERATURE as REQUEST_TEMPERATURE,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_REQUEST_TOP_P as REQUEST_TOP_P,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_RESPONSE_FINISH_REASONS as RESPONSE_FINISH_REASONS,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_RESPONSE_ID as RESPONSE_ID,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_RESPONSE_MODEL as RESPONSE_MODEL,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_TOOL_CALL_ID as TOOL_CALL_ID,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_TOOL_NAME as TOOL_NAME,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_USAGE_INPUT_TOKENS as USAGE_INPUT_TOKENS,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_USAGE_OUTPUT_TOKENS as USAGE_OUTPUT_TOKENS,
)
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GenAiOperationNameValues,
)
from opentelemetry.semconv._incubating.metrics.gen_ai_metrics import (
    GEN_AI_CLIENT_OPERATION_DURATION as METRIC_OPERATION_DURATION,
)
from opentelemetry.semconv._incubating.metrics.gen_ai_metrics import (
    GEN_AI_CLIENT_TOKEN_USAGE as METRIC_TOKEN_USAGE,
)

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "CONVERSATION_ID",
    "METRIC_OPERATION_DURATION",
    "METRIC_TOKEN_USAGE",
    "OPERATION_NAME",
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

OPERATION_CHAT = GenAiOperationNameValues.CHAT.value
OPERATION_TEXT_COMPLETION = GenAiOperationNameValues.TEXT_COMPLETION.value
OPERATION_EMBEDDINGS = GenAiOperationNameValues.EMBEDDINGS.value
OPERATION_EXECUTE_TOOL = GenAiOperationNameValues.EXECUTE_TOOL.value
OPERATION_INVOKE_AGENT = GenAiOperationNameValues.INVOKE_AGENT.value


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
