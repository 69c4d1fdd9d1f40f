"""How an agent thinks: one model call, or a ReAct loop of model calls and tool runs.

A cognition is anything with ``drive(run) -> AsyncIterator[StreamEvent]`` that ends with one
``final`` event; ``run`` is the ``AgentRun`` holding the transcript and doing the model calls.

``SingleCallCognition`` (the default) calls the model once and returns its answer (again, with the
validation error, when a typed answer does not parse and the agent has ``output_retries`` left).

``ReActCognition(tools=[...], max_iterations=...)`` offers the tools' schemas to the model and loops:
an answer with tool calls runs each tool (in order, through ``ctx.invoker.tool`` so the tool
middleware applies) and appends the results as ``tool`` messages; an answer without tool calls is the
final answer. Its rules:

* Each call runs by the rules of ``core.agents.tool_calls.run_tool_call`` (shared with a durable
  run that settles the calls its process left unanswered): a tool that raises becomes a ``tool``
  message reading ``error: <type>: <message>``, and the loop goes on: the model sees the failure and
  can recover. So does a call to a tool that does not exist. Three things are not tool failures and
  propagate: ``Cancelled`` (the run was told to stop), ``MeterExceeded`` (a ceiling was crossed) and
  every ``BaseException`` that is not an ``Exception`` (task cancellation, ``ScriptExhausted``).
* Safe points: the cancellation token is checked before each model call and before each tool run.
* After ``max_iterations`` model calls without a final answer the run stops with reason
  ``max_iterations`` and the last text the model produced.
* Each tool run is announced as a ``step`` observation (``ctx.emit``) and as ``tool_call`` /
  ``tool_result`` stream events; the result event carries the tool's value, or the error text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from core.agents.result import StopReason
from core.agents.session import AgentRun
from core.agents.tool_calls import render_tool_result, run_tool_call
from core.contracts.ports import ToolPort
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind, ToolCall

__all__ = ["Cognition", "ReActCognition", "SingleCallCognition", "render_tool_result"]


@runtime_checkable
class Cognition(Protocol):
    """Drives one run to its ``final`` event."""

    def drive(self, run: AgentRun) -> AsyncIterator[StreamEvent]: ...


class SingleCallCognition:
    """One model call; its answer is the result."""

    async def drive(self, run: AgentRun) -> AsyncIterator[StreamEvent]:
        while True:
            async for event in run.model_step():
                yield event
            content = run.last.content if run.last is not None else ""
            if not run.reask(content):
                break
        run.messages.append(Message(Role.ASSISTANT, content))
        yield run.finish(content)


class ReActCognition:
    """Reason, act with tools, observe the results; repeat until the model answers."""

    def __init__(self, tools: Sequence[ToolPort] = (), *, max_iterations: int = 10) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            raise ValueError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
        self.tools = tuple(tools)
        self.max_iterations = max_iterations
        self._by_name: dict[str, ToolPort] = {}
        for tool in self.tools:
            if tool.name in self._by_name:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._by_name[tool.name] = tool
        schemas = [tool.schema for tool in self.tools if tool.schema is not None]
        self._schemas = schemas or None

    async def drive(self, run: AgentRun) -> AsyncIterator[StreamEvent]:
        for _ in range(self.max_iterations):
            async for event in run.model_step(self._schemas):
                yield event
            answer = run.last
            if answer is None or not answer.tool_calls:
                content = answer.content if answer is not None else ""
                if run.reask(content):
                    continue
                run.messages.append(Message(Role.ASSISTANT, content))
                yield run.finish(content)
                return
            run.messages.append(Message(Role.ASSISTANT, answer.content, tool_calls=answer.tool_calls))
            for call in answer.tool_calls:
                run.ctx.check_cancelled()
                yield StreamEvent(StreamEventKind.TOOL_CALL, tool_call=call)
                value, text = await self._run_tool(run, call)
                run.messages.append(Message(Role.TOOL, text, name=call.name, tool_call_id=call.id))
                yield StreamEvent(StreamEventKind.TOOL_RESULT, tool_call=call, tool_result=value)
        yield run.stopped(
            StopReason.MAX_ITERATIONS, f"no final answer after {self.max_iterations} model call(s)"
        )

    async def _run_tool(self, run: AgentRun, call: ToolCall) -> tuple[Any, str]:
        await run.ctx.emit(
            "step", f"tool {call.name}", payload={"tool": call.name, "call_id": call.id}, agent=run.agent.name
        )
        return await run_tool_call(run.ctx, call, self._by_name)
