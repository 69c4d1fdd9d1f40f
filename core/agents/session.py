"""``AgentRun``: the state of one agent run, shared by the ``Agent`` and its cognition.

A cognition decides *what* to do next (call the model again, run a tool, stop); ``AgentRun`` does
the mechanics every cognition needs the same way: one model step through ``ctx.invoker.stream``
(compacting the transcript first when the agent has a compactor, forwarding token events with typed
partials, accumulating usage), and building the final or stopped ``AgentResult``. Because the state
lives here rather than inside the cognition, the ``Agent`` can still report the transcript, usage and
last text when a budget or a cancellation cuts the cognition off mid-step.

A typed answer that does not parse is sent back with its validation error (``reask``) up to the
agent's ``output_retries`` times before the run ends as ``invalid_output``. When an
``output_coerce()`` middleware is in the chain, its ``Delta.partial`` values are forwarded onto
``StreamEvent.partial_output`` as they are; otherwise the run builds the partials itself.

``ctx.check_cancelled()`` runs before every model step: that is the safe point where a cancelled
run stops without spending another call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from core.agents.output import OutputSpec
from core.agents.result import AgentResult, StopReason
from core.contracts.errors import KeelError
from core.contracts.types import (
    ChatRequest,
    Delta,
    LLMResult,
    Message,
    Role,
    StreamEvent,
    StreamEventKind,
    ToolSchema,
    Usage,
    assemble_deltas,
)
from core.runtime.meters import MeterExceeded

if TYPE_CHECKING:
    from core.agents.agent import Agent

__all__ = ["AgentRun", "InvokerMissing", "reask_prompt"]


def reask_prompt(problem: str) -> str:
    """The user message that sends a validation error back to the model."""
    return (
        f"Your answer could not be used: {problem}. Answer again with only the JSON object the task asks for."
    )


class InvokerMissing(KeelError, AttributeError):
    """The run's context has no invoker, so the agent cannot call a model.

    Also an ``AttributeError``: reaching for ``ctx.invoker`` and finding nothing is what it is.
    """


class AgentRun:
    """One run in progress: the agent, the context, the transcript and what has been spent."""

    def __init__(self, agent: Agent, task: str, ctx: Any, messages: list[Message]) -> None:
        self.agent = agent
        self.task = task
        self.ctx = ctx
        self.messages = messages
        self.usage = Usage()
        self.model_calls = 0
        self.last: LLMResult | None = None
        self.last_text = ""
        self.reasks = 0
        self._output = OutputSpec(agent.output_type) if agent.output_type is not None else None

    async def model_step(self, tools: Sequence[ToolSchema] | None = None) -> AsyncIterator[StreamEvent]:
        """Call the model once on the transcript; yields token events, leaves the result in ``last``."""
        ctx = self.ctx
        ctx.check_cancelled()
        invoker = ctx.invoker
        if invoker is None:
            raise InvokerMissing(
                f"agent {self.agent.name!r}: ctx.invoker is None, so there is no model to call "
                "(in a test, build the context with make_test_ctx(llm=...))"
            )
        agent = self.agent
        if agent.compactor is not None:
            self.messages = list(await agent.compactor.compact(self.messages, ctx))
        request = ChatRequest(
            messages=self.messages,
            model=agent.model,
            tools=tools,
            response_format=self._output.response_format() if self._output is not None else None,
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
        )
        output = self._output
        if output is not None:
            output.reset()
        self.last = None
        deltas: list[Delta] = []
        text = ""
        meta: dict[str, Any] = {}
        if output is not None:
            meta["output_type"] = agent.output_type
        try:
            async for delta in invoker.stream(request, ctx, meta=meta):
                deltas.append(delta)
                if delta.text:
                    text += delta.text
                    if meta.get("output_coerced"):
                        partial = delta.partial  # an output_coerce() middleware built it: forward it
                    else:
                        partial = output.partial(text) if output is not None else None
                    yield StreamEvent(StreamEventKind.MESSAGE_DELTA, text=delta.text, partial_output=partial)
        finally:
            # Recorded even when the step ends in an exception (a meter crossed after the answer
            # arrived), so a stopped result still reports the text and the spend.
            if deltas:
                result = assemble_deltas(deltas)
                self.last = result
                self.last_text = result.content
                self.usage = self.usage + result.usage
                self.model_calls += 1

    # ---- for cognitions that do not call a model through the invoker (a CLI session) -----------

    def text_event(self, text: str, text_so_far: str) -> StreamEvent:
        """A token event for ``text`` (the answer so far is ``text_so_far``), with its typed partial."""
        if self._output is not None and text_so_far == text:
            self._output.reset()
        partial = self._output.partial(text_so_far) if self._output is not None else None
        self.last_text = text_so_far
        return StreamEvent(StreamEventKind.MESSAGE_DELTA, text=text, partial_output=partial)

    def reask(self, content: str) -> bool:
        """When ``content`` does not parse and the agent has re-asks left, ask the model again.

        Appends the answer and a user message quoting the validation error to the transcript and
        returns ``True`` (the cognition then makes another model step); otherwise returns ``False``.
        """
        problem = self.output_error(content)
        if problem is None or self.reasks >= self.agent.output_retries:
            return False
        self.reasks += 1
        self.messages.append(Message(Role.ASSISTANT, content))
        self.messages.append(Message(Role.USER, reask_prompt(problem)))
        return True

    def output_error(self, content: str) -> str | None:
        """Why ``content`` does not parse as the agent's output type, or ``None`` when it does."""
        if self._output is None:
            return None
        try:
            self._output.parse(content)
        except (ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def guard_meters(self) -> None:
        """Refuse the next piece of work if any meter of the run is already exhausted."""
        ctx = self.ctx
        for each in ctx.all_meters:
            each.guard(ctx.scope)

    def bill(self, usage: Usage, calls: int = 1) -> None:
        """Add ``usage`` to the run and charge every meter of the run with it (``meter()``'s rule:
        every meter is charged, then the first ``MeterExceeded`` is raised)."""
        self.usage = self.usage + usage
        self.model_calls += calls
        ctx = self.ctx
        crossed: MeterExceeded | None = None
        for each in ctx.all_meters:
            try:
                each.charge(usage, ctx.scope)
            except MeterExceeded as exc:
                crossed = crossed or exc
        if crossed is not None:
            raise crossed

    def finish(self, content: str) -> StreamEvent:
        """The final event for ``content``, parsed when the agent declared an output type."""
        if self._output is None:
            return self._final(
                AgentResult(content, self.usage, messages=self.messages, model_calls=self.model_calls)
            )
        try:
            parsed = self._output.parse(content)
        except (ValueError, TypeError) as exc:
            return self.stopped(StopReason.INVALID_OUTPUT, f"{type(exc).__name__}: {exc}", output=content)
        return self._final(
            AgentResult(
                content, self.usage, parsed=parsed, messages=self.messages, model_calls=self.model_calls
            )
        )

    def stopped(self, reason: StopReason, error: str, *, output: str | None = None) -> StreamEvent:
        """The final event of a run that ended without a usable answer."""
        return self._final(
            AgentResult(
                self.last_text if output is None else output,
                self.usage,
                reason=reason,
                error=error,
                messages=self.messages,
                model_calls=self.model_calls,
            )
        )

    def _final(self, result: AgentResult) -> StreamEvent:
        return StreamEvent(StreamEventKind.FINAL, text=result.output, result=result, usage=result.usage)
