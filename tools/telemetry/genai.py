"""Names from OpenTelemetry's GenAI semantic conventions, for the spans LLM calls will make.

Only names and two small helpers live here, so the LLM tool (a later issue) and agent plugins use
one spelling of each attribute: the span of a model call is named ``"{operation} {model}"``, has
kind CLIENT, and carries ``gen_ai.operation.name``, ``gen_ai.provider.name`` and
``gen_ai.request.model``; token counts go in ``gen_ai.usage.*`` when the response arrives. The
telemetry tool's ``start_genai_span`` builds such a span. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_TOP_P = "gen_ai.request.top_p"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"

OPERATION_CHAT = "chat"
OPERATION_TEXT_COMPLETION = "text_completion"
OPERATION_EMBEDDINGS = "embeddings"
OPERATION_EXECUTE_TOOL = "execute_tool"
OPERATION_INVOKE_AGENT = "invoke_agent"

METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"


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
