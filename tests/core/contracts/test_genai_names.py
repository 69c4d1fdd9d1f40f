"""core.contracts.genai spells each GenAI name exactly as the semantic-conventions package does."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv_genai
from opentelemetry.semconv.attributes import error_attributes

from core.contracts import genai
from core.contracts.types import Usage

PAIRS = {
    "OPERATION_NAME": semconv_genai.GEN_AI_OPERATION_NAME,
    "PROVIDER_NAME": semconv_genai.GEN_AI_PROVIDER_NAME,
    "REQUEST_MODEL": semconv_genai.GEN_AI_REQUEST_MODEL,
    "RESPONSE_MODEL": semconv_genai.GEN_AI_RESPONSE_MODEL,
    "RESPONSE_ID": semconv_genai.GEN_AI_RESPONSE_ID,
    "RESPONSE_FINISH_REASONS": semconv_genai.GEN_AI_RESPONSE_FINISH_REASONS,
    "USAGE_INPUT_TOKENS": semconv_genai.GEN_AI_USAGE_INPUT_TOKENS,
    "USAGE_OUTPUT_TOKENS": semconv_genai.GEN_AI_USAGE_OUTPUT_TOKENS,
    "USAGE_CACHE_READ_INPUT_TOKENS": semconv_genai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    "USAGE_CACHE_CREATION_INPUT_TOKENS": semconv_genai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    "AGENT_NAME": semconv_genai.GEN_AI_AGENT_NAME,
    "CONVERSATION_ID": semconv_genai.GEN_AI_CONVERSATION_ID,
    "TOOL_NAME": semconv_genai.GEN_AI_TOOL_NAME,
    "TOOL_CALL_ID": semconv_genai.GEN_AI_TOOL_CALL_ID,
    "TOOL_TYPE": semconv_genai.GEN_AI_TOOL_TYPE,
    "ERROR_TYPE": error_attributes.ERROR_TYPE,
    "OPERATION_CHAT": semconv_genai.GenAiOperationNameValues.CHAT.value,
    "OPERATION_EXECUTE_TOOL": semconv_genai.GenAiOperationNameValues.EXECUTE_TOOL.value,
    "OPERATION_INVOKE_AGENT": semconv_genai.GenAiOperationNameValues.INVOKE_AGENT.value,
}


def test_every_name_is_the_conventions_own() -> None:
    spelled = {name: getattr(genai, name) for name in dir(genai) if name.isupper()}
    assert spelled == PAIRS


def test_the_token_rule() -> None:
    usage = Usage(input_tokens=5, output_tokens=3, cache_read_tokens=7, cache_write_tokens=2)
    assert usage.prompt_tokens == 14
    assert genai.usage_attributes(usage) == {
        "gen_ai.usage.input_tokens": 14,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.cache_read.input_tokens": 7,
        "gen_ai.usage.cache_creation.input_tokens": 2,
    }
    assert genai.usage_attributes(Usage(input_tokens=4)) == {
        "gen_ai.usage.input_tokens": 4,
        "gen_ai.usage.output_tokens": 0,
    }
    assert genai.usage_attributes(Usage()) == {} and genai.usage_attributes(None) == {}
