"""core.contracts.genai spells each GenAI name exactly as the semantic-conventions package does."""

from __future__ import annotations

import ast

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv_genai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as semconv_genai_metrics
from opentelemetry.semconv.attributes import error_attributes

from core.contracts import genai
from core.contracts.accounting import ModelUsage
from core.contracts.types import Usage
from tests.core.test_core_purity import python_files
from tests.kit import PROJECT

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
    "AGENT_ID": semconv_genai.GEN_AI_AGENT_ID,
    "REQUEST_MAX_TOKENS": semconv_genai.GEN_AI_REQUEST_MAX_TOKENS,
    "REQUEST_TEMPERATURE": semconv_genai.GEN_AI_REQUEST_TEMPERATURE,
    "REQUEST_TOP_P": semconv_genai.GEN_AI_REQUEST_TOP_P,
    "TOKEN_TYPE": semconv_genai.GEN_AI_TOKEN_TYPE,
    "ERROR_TYPE": error_attributes.ERROR_TYPE,
    "METRIC_OPERATION_DURATION": semconv_genai_metrics.GEN_AI_CLIENT_OPERATION_DURATION,
    "METRIC_TOKEN_USAGE": semconv_genai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
    "OPERATION_CHAT": semconv_genai.GenAiOperationNameValues.CHAT.value,
    "OPERATION_TEXT_COMPLETION": semconv_genai.GenAiOperationNameValues.TEXT_COMPLETION.value,
    "OPERATION_EMBEDDINGS": semconv_genai.GenAiOperationNameValues.EMBEDDINGS.value,
    "OPERATION_EXECUTE_TOOL": semconv_genai.GenAiOperationNameValues.EXECUTE_TOOL.value,
    "OPERATION_INVOKE_AGENT": semconv_genai.GenAiOperationNameValues.INVOKE_AGENT.value,
    "TOKEN_TYPE_INPUT": semconv_genai.GenAiTokenTypeValues.INPUT.value,
    "TOKEN_TYPE_OUTPUT": semconv_genai.GenAiTokenTypeValues.OUTPUT.value,
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


def test_the_token_rule_is_written_once() -> None:
    usage = Usage(input_tokens=5, output_tokens=3, cache_read_tokens=7, cache_write_tokens=2)
    assert ModelUsage.from_usage(usage).input_tokens == usage.prompt_tokens
    assert ModelUsage.from_usage(usage).to_usage() == Usage(
        input_tokens=5, output_tokens=3, cache_read_tokens=7, cache_write_tokens=2
    )


def gen_ai_literals(source: str) -> list[int]:
    """Lines of ``source`` where a string (not a docstring) holds a ``gen_ai.`` name."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "gen_ai." in node.value
        and id(node) not in docstrings
    )


def test_no_other_module_spells_a_genai_name() -> None:
    home = PROJECT / "core" / "contracts" / "genai.py"
    offenders = [
        f"{path.relative_to(PROJECT)}:{line}"
        for directory in ("core", "tools", "domains")
        for path in python_files(PROJECT / directory)
        if path != home
        for line in gen_ai_literals(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "import the name from core.contracts.genai"


def test_the_genai_guard_sees_strings_but_not_docstrings() -> None:
    source = '"""About gen_ai.request.model."""\nX = {"gen_ai.tool.name": 1}\ndef f():\n    """gen_ai.x"""\n'
    assert gen_ai_literals(source) == [2]
