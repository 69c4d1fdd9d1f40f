"""The OpenTelemetry GenAI attribute names ``core`` stamps on spans, and the one token rule.

``core`` imports only the standard library, so it cannot take these names from the
``opentelemetry-semantic-conventions`` package; they are spelled here once, for ``core`` and the
tools alike (tests/core/contracts/test_genai_names.py checks each against that package, and that
no other module spells a ``gen_ai.*`` name).

The token rule: Keel's ``Usage.input_tokens`` is the uncached part of the prompt, while the
conventions' ``gen_ai.usage.input_tokens`` counts every prompt token, cached ones included
(``Usage.prompt_tokens``); the cached parts are also reported on their own. Usage that is unknown
is left out, never reported as 0: a ``Usage`` whose every count is 0 is what a call that reported
nothing adds up to (a real model call always reads at least one token).
"""

from __future__ import annotations

from typing import Any

from core.contracts.types import Usage

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
AGENT_ID = "gen_ai.agent.id"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_TOP_P = "gen_ai.request.top_p"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"

METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"

OPERATION_CHAT = "chat"
OPERATION_TEXT_COMPLETION = "text_completion"
OPERATION_EMBEDDINGS = "embeddings"
OPERATION_EXECUTE_TOOL = "execute_tool"
OPERATION_INVOKE_AGENT = "invoke_agent"

TOKEN_TYPE_INPUT = "input"
TOKEN_TYPE_OUTPUT = "output"


def usage_attributes(usage: Usage | None) -> dict[str, Any]:
    """The ``gen_ai.usage.*`` attributes of ``usage``; empty when the usage is not known."""
    if usage is None or usage.total_tokens == 0:
        return {}
    attributes: dict[str, Any] = {
        USAGE_INPUT_TOKENS: usage.prompt_tokens,
        USAGE_OUTPUT_TOKENS: usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes[USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes[USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write_tokens
    return attributes
