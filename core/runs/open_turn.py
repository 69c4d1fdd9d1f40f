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

The settling is a stream of ``tool_call`` / ``tool_result`` events, as a cognition's tool loop is:
:func:`settle_open_turn` yields them and the run (``core.runs.execution``) records and checkpoints
each one as it records the cognition's, so this module knows nothing of the run that consumes it.
A tool is run by the rules ``ReActCognition`` follows (``core.agents.tool_calls.run_tool_call``):
through ``ctx.invoker.tool`` (so the tool middleware applies), an unknown tool or a tool that raises
becomes an ``error: ...`` result the model sees, while ``Cancelled`` and ``MeterExceeded`` propagate.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from core.agents import AgentRun, ReActCognition
from core.agents.cognition import Cognition
from core.agents.tool_calls import is_side_effecting, run_tool_call
from core.contracts.ports import StorePort, ToolPort
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind, ToolCall

from .record import RunRecord
from .tool_records import call_key, recorded_result

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


async def settle_open_turn(
    run: AgentRun, record: RunRecord, store: StorePort | None, cognition: Cognition
) -> AsyncGenerator[StreamEvent, None]:
    """The events that answer every unanswered call of the transcript's last assistant turn.

    The consumer must record each event before asking for the next: a ``tool_call`` event is
    followed by the call running, which relies on its ``pending`` checkpoint being saved.
    """
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
        key = call_key(record.run_id, turn, call.id)
        pending = record.pending
        asked = None
        if pending is not None and pending.get("key") == key:
            asked = pending.get("awaiting_approval")
            recorded = await recorded_result(store, key)
            if recorded is not None:
                yield _answer(run, call, recorded["result"], str(recorded["text"]))
                continue
            tool = tools.get(call.name)
            # A call still awaiting a human's approval never started: it is asked about again.
            if tool is None or (is_side_effecting(tool) and asked is None):
                yield _answer(run, call, UNKNOWN_OUTCOME, UNKNOWN_OUTCOME)
                continue
        yield StreamEvent(StreamEventKind.TOOL_CALL, tool_call=call)
        if asked is not None and record.pending is not None:
            record.pending["awaiting_approval"] = asked  # the same question and expiry
        if call.name in tools:
            run.ctx.check_cancelled()
        value, text = await run_tool_call(run.ctx, call, tools)
        yield _answer(run, call, value, text)


def _answer(run: AgentRun, call: ToolCall, value: Any, text: str) -> StreamEvent:
    """The result event of ``call``, its ``tool`` message appended to the transcript first."""
    run.messages.append(Message(Role.TOOL, text, name=call.name, tool_call_id=call.id))
    return StreamEvent(StreamEventKind.TOOL_RESULT, tool_call=call, tool_result=value)
