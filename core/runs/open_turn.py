"""Finishing the tool calls a run was in the middle of when its process stopped.

A run checkpointed between "the model asked for tools" and "every tool has answered" ends its
transcript with an assistant turn whose calls are not all answered, and no model accepts a
transcript like that. Before the cognition continues, each unanswered call is settled, in order:

* the call that was in flight (it is the checkpoint's ``pending`` call, so it may have run):
  - its result was recorded in the store after it returned: that result is used, the tool is not
    called again;
  - nothing was recorded and the tool is side-effecting (every tool that does not declare
    ``side_effecting = False``): it is *not* repeated; the model is told the outcome is unknown,
    and can check or ask;
  - nothing was recorded and the tool declares ``side_effecting = False``: it is run again;
* a call that never started is run now, checkpointed before and after like any other.

Running a tool here follows ``ReActCognition``'s rules: through ``ctx.invoker.tool`` (so the tool
middleware applies), an unknown tool or a tool that raises becomes an ``error: ...`` result the model
sees, while ``Cancelled`` and ``MeterExceeded`` propagate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.agents import ReActCognition
from core.agents.cognition import Cognition, render_tool_result
from core.contracts.ports import ToolPort
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind, ToolCall, ToolRequest
from core.execution.cancellation import Cancelled
from core.runtime import MeterExceeded

from .tool_records import call_key, is_side_effecting, recorded_result

if TYPE_CHECKING:
    from .execution import RunExecution

UNKNOWN_OUTCOME = (
    "error: this call was in progress when the run's process stopped, so its outcome is unknown; "
    "the tool has side effects, so it was not run again"
)


def last_assistant_turn(messages: Sequence[Message]) -> int:
    """The index of the last assistant message (-1 when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == Role.ASSISTANT:
            return index
    return -1


async def finish_open_turn(execution: RunExecution, cognition: Cognition) -> None:
    run = execution.agent_run
    turn = last_assistant_turn(run.messages)
    if turn < 0 or not run.messages[turn].tool_calls:
        return
    answered = {m.tool_call_id for m in run.messages[turn + 1 :] if m.role == Role.TOOL}
    tools: dict[str, ToolPort] = (
        {t.name: t for t in cognition.tools} if isinstance(cognition, ReActCognition) else {}
    )
    for call in run.messages[turn].tool_calls:
        if call.id in answered:
            continue
        key = call_key(execution.record.run_id, turn, call.id)
        pending = execution.record.pending
        asked = None
        if pending is not None and pending.get("key") == key:
            asked = pending.get("awaiting_approval")
            recorded = await recorded_result(execution.services.store, key)
            if recorded is not None:
                await _answer(execution, call, recorded["result"], str(recorded["text"]))
                continue
            tool = tools.get(call.name)
            # A call still awaiting a human's approval never started: it is asked about again.
            if tool is None or (is_side_effecting(tool) and asked is None):
                await _answer(execution, call, UNKNOWN_OUTCOME, UNKNOWN_OUTCOME)
                continue
        await execution.step(StreamEvent(StreamEventKind.TOOL_CALL, tool_call=call))
        if asked is not None and execution.record.pending is not None:
            execution.record.pending["awaiting_approval"] = asked  # the same question and expiry
        value, text = await _run_tool(execution, call, tools)
        await _answer(execution, call, value, text)


async def _answer(execution: RunExecution, call: ToolCall, value: Any, text: str) -> None:
    execution.agent_run.messages.append(Message(Role.TOOL, text, name=call.name, tool_call_id=call.id))
    await execution.step(StreamEvent(StreamEventKind.TOOL_RESULT, tool_call=call, tool_result=value))


async def _run_tool(execution: RunExecution, call: ToolCall, tools: dict[str, ToolPort]) -> tuple[Any, str]:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        text = f"error: there is no tool named {call.name!r} (available: {known})"
        return text, text
    ctx = execution.ctx
    ctx.check_cancelled()
    request = ToolRequest(call.name, call.arguments, tool=tool, side_effecting=is_side_effecting(tool))
    try:
        value = await ctx.invoker.tool(request, ctx)  # type: ignore[union-attr]
    except (Cancelled, MeterExceeded):
        raise
    except Exception as exc:
        text = f"error: {type(exc).__name__}: {exc}"
        return text, text
    return value, render_tool_result(value)
