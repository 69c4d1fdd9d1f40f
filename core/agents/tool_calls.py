"""Running one tool call the model asked for, by the rules every runner of tool calls shares.

Two places run a model's tool calls: ``ReActCognition``'s loop, and a durable run settling the calls
its previous process left unanswered (``core.runs.open_turn``). Both must give the model the same
answers for the same failures, so both go through :func:`run_tool_call`:

* the call runs through ``ctx.invoker.tool``, so the tool middleware applies;
* a call to a tool that does not exist, or a tool that raises, becomes an ``error: ...`` result the
  model sees (it can recover), while ``Cancelled``, ``MeterExceeded`` and every ``BaseException``
  that is not an ``Exception`` propagate: they are not tool failures;
* the result's text (the ``tool`` message) is :func:`render_tool_result` of its value;
* a tool is side-effecting unless it declares ``side_effecting = False`` (:func:`is_side_effecting`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.contracts.ports import ToolPort
from core.contracts.types import ToolCall, ToolRequest
from core.execution.cancellation import Cancelled
from core.runtime.context import InvokingContext
from core.runtime.meters import MeterExceeded
from core.serialization import thaw

__all__ = ["is_side_effecting", "render_tool_result", "run_tool_call"]


def is_side_effecting(tool: object) -> bool:
    """True unless the tool declares ``side_effecting = False`` (safe to run again)."""
    return getattr(tool, "side_effecting", True) is not False


def render_tool_result(value: Any) -> str:
    """A tool's return value as the text of a ``tool`` message (JSON when it is JSON-like)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(thaw(value), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


async def run_tool_call(
    ctx: InvokingContext, call: ToolCall, tools: Mapping[str, ToolPort]
) -> tuple[Any, str]:
    """Run ``call`` with the tool of its name in ``tools``; its value and the text the model is shown.
    ``ctx`` is the run's context, with the ``invoker`` that runs the call."""
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        text = f"error: there is no tool named {call.name!r} (available: {known})"
        return text, text
    request = ToolRequest(
        call.name, call.arguments, tool=tool, side_effecting=is_side_effecting(tool), call_id=call.id
    )
    try:
        value = await ctx.invoker.tool(request, ctx)
    except (Cancelled, MeterExceeded):
        raise
    except Exception as exc:
        text = f"error: {type(exc).__name__}: {exc}"
        return text, text
    return value, render_tool_result(value)
