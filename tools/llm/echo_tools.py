"""The echo model's scripted tool calls: how an offline demo shows an agent using its tools.

A real model decides on its own to call a tool; the echo model does so by a rule anyone can read
and predict, so a ReAct run is visible end to end with no server and no key:

* Only when the request offers tools and its last message is the user's (after a tool result the
  model answers ``echo: <result>`` instead).
* The tool called is the first offered tool whose name appears in that message as a whole word
  (``find_products``, not ``find_products_fast``); none named, no call.
* Its arguments come from the text after the name, the first of these that applies:

  - a JSON object (``find_products {"query": "walnut"}``);
  - ``key=value`` pairs (``find_products query=walnut limit=3``; quote a value that has spaces,
    ``query="walnut keyboard"``), each converted to the type the tool's schema gives it
    (``integer``, ``number``, ``boolean``), left a string when it does not convert;
  - when the tool takes exactly one parameter, the rest of the text, trimmed of surrounding
    punctuation (``find_products: walnut keyboard?`` gives ``{"query": "walnut keyboard"}``);
  - otherwise no arguments.

* The call's id is ``echo-call-<n>``, ``n`` counting the tool-calling turns of the transcript, so
  the same transcript always gets the same id.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from core.contracts.types import Message, Role, ToolCall, ToolSchema

_PAIR = re.compile(r"""(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>"[^"]*"|'[^']*'|\S+)""")
_TRIM = " \t\r\n:,.;!?\"'()"


def scripted_tool_call(messages: Sequence[Message], tools: Sequence[ToolSchema] | None) -> ToolCall | None:
    """The tool call the echo model makes for this transcript, or ``None`` (see the module docstring)."""
    if not tools or not messages or messages[-1].role != Role.USER:
        return None
    text = messages[-1].content
    found = _first_named(text, tools)
    if found is None:
        return None
    tool, end = found
    turn = 1 + sum(1 for m in messages if m.role == Role.ASSISTANT and m.tool_calls)
    return ToolCall(f"echo-call-{turn}", tool.name, _arguments(text[end:], tool))


def _first_named(text: str, tools: Sequence[ToolSchema]) -> tuple[ToolSchema, int] | None:
    """The tool named earliest in ``text`` and where its name ends."""
    best: tuple[int, ToolSchema, int] | None = None
    for tool in tools:
        match = re.search(rf"(?<![A-Za-z0-9_]){re.escape(tool.name)}(?![A-Za-z0-9_])", text)
        if match is not None and (best is None or match.start() < best[0]):
            best = (match.start(), tool, match.end())
    return (best[1], best[2]) if best is not None else None


def _arguments(rest: str, tool: ToolSchema) -> dict[str, Any]:
    properties = _properties(tool)
    start = rest.find("{")
    if start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(rest[start:])
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    pairs = {m["key"]: _unquote(m["value"]) for m in _PAIR.finditer(rest)}
    if pairs:
        return {key: _convert(value, properties.get(key)) for key, value in pairs.items()}
    if len(properties) == 1:
        value = rest.strip(_TRIM)
        if value:
            name, schema = next(iter(properties.items()))
            return {name: _convert(value, schema)}
    return {}


def _properties(tool: ToolSchema) -> dict[str, Mapping[str, Any]]:
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return {}
    return {str(k): v if isinstance(v, Mapping) else {} for k, v in properties.items()}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        try:
            return shlex.split(value)[0]
        except ValueError:
            return value[1:-1]
    return value


def _convert(value: str, schema: Mapping[str, Any] | None) -> Any:
    kind = schema.get("type") if schema is not None else None
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    return value
