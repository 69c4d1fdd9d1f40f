"""``Agent``: a named model, a way of thinking, and the run that puts them to work.

``await agent.run(task, ctx)`` returns an ``AgentResult``; ``agent.stream(task, ctx)`` yields the
run's ``StreamEvent`` s (tokens, tool calls and results, then one ``final`` event carrying the same
result). ``run`` is ``stream`` consumed to its final event.

A run opens two spans on ``ctx.trace``: ``("invoke_agent", "client")`` around the whole run, and
inside it ``("compose", "compose")`` around assembling the first transcript: the agent's ``system``
prompt, the grounding text (when the agent has a ``grounder``), the seeded ``context`` and the task
as the user message. ``context`` is a sequence of ``Message`` s, or an object with a ``messages``
attribute holding one. Model calls and tool runs get their own spans only from the ``tracing()``
policy.

A run that a budget or a cancellation cuts short does not raise: it ends with a ``final`` event whose
result has ``stopped`` set, ``reason`` ``budget_exhausted`` (a ``MeterExceeded`` from the meters)
or ``cancelled`` (the run's token), the text produced so far, and the usage spent. Task cancellation
(``asyncio.CancelledError``) is not converted: it propagates, like every ``BaseException``.

``until=`` takes a ``TerminationCondition``: the run's own stop rule, checked after each event; when
it fires the cognition is closed and the run ends with reason ``terminated`` (see
``core.agents.termination``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from core.agents.capabilities import Compactor, Grounder
from core.agents.cognition import Cognition, SingleCallCognition
from core.agents.output import OutputSpec
from core.agents.result import AgentResult, StopReason
from core.agents.session import AgentRun
from core.agents.termination import TerminationCondition
from core.contracts import genai
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind
from core.execution.cancellation import Cancelled
from core.runtime.meters import MeterExceeded

__all__ = ["Agent"]

_DEFAULT_COGNITION = SingleCallCognition()


def _seed(context: Any) -> list[Message]:
    if context is None:
        return []
    messages = getattr(context, "messages", context)
    seeded = list(messages)
    for message in seeded:
        if not isinstance(message, Message):
            raise TypeError(f"context must hold Message values, got {type(message).__name__}")
    return seeded


class Agent:
    """A named agent: which model it calls, how it thinks, and what it must answer with."""

    def __init__(
        self,
        name: str,
        model: str,
        cognition: Cognition | None = None,
        system: str | None = None,
        output_type: Any = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        grounder: Grounder | None = None,
        compactor: Compactor | None = None,
        output_retries: int = 0,
    ) -> None:
        if not name:
            raise ValueError("an agent needs a name")
        if not model:
            raise ValueError(f"agent {name!r} needs a model")
        if isinstance(output_retries, bool) or not isinstance(output_retries, int) or output_retries < 0:
            raise ValueError(f"output_retries must be a non-negative int, got {output_retries!r}")
        if output_type is not None:
            OutputSpec(output_type)  # refuse an unsupported type now, not on the first run
        self.name = name
        self.model = model
        self.cognition: Cognition = cognition if cognition is not None else _DEFAULT_COGNITION
        self.system = system
        self.output_type = output_type
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.grounder = grounder
        self.compactor = compactor
        self.output_retries = output_retries

    async def run(
        self, task: str, ctx: Any, context: Any = None, *, until: TerminationCondition | None = None
    ) -> AgentResult:
        """Run the agent on ``task`` to its end (or until ``until`` fires) and return the result."""
        final: AgentResult | None = None
        async for event in self.stream(task, ctx, context, until=until):
            if event.kind == StreamEventKind.FINAL:
                final = event.result
        if final is None:  # a cognition that ended without a final event broke its contract
            raise RuntimeError(f"agent {self.name!r}: the cognition ended without a final event")
        return final

    async def stream(
        self, task: str, ctx: Any, context: Any = None, *, until: TerminationCondition | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Run the agent on ``task``, yielding each step as it happens; the last event is ``final``."""
        trace = ctx.trace
        attrs = {
            genai.OPERATION_NAME: genai.OPERATION_INVOKE_AGENT,
            genai.AGENT_NAME: self.name,
            genai.REQUEST_MODEL: self.model,
        }
        with trace.span("invoke_agent", "client", attrs) as span:
            run = AgentRun(self, task, ctx, [])
            final: AgentResult | None = None
            try:
                ctx.check_cancelled()
                with trace.span("compose", "compose"):
                    run.messages = await self._compose(task, ctx, context)
                steps = self.cognition.drive(run)
                try:
                    async for event in steps:
                        if event.kind == StreamEventKind.FINAL:
                            final = event.result
                        yield event
                        if final is None and until is not None:
                            reason = until(event, run)
                            if reason is not None:
                                event = run.stopped(StopReason.TERMINATED, reason)
                                final = event.result
                                yield event
                                break
                finally:
                    close = getattr(steps, "aclose", None)
                    if close is not None:
                        await close()
            except MeterExceeded as exc:
                event = run.stopped(StopReason.BUDGET_EXHAUSTED, exc.reason)
                final = event.result
                yield event
            except Cancelled as exc:
                event = run.stopped(StopReason.CANCELLED, str(exc))
                final = event.result
                yield event
            if final is not None:
                span.set_attribute("keel.agent.stop_reason", str(final.reason))
                for key, value in genai.usage_attributes(final.usage).items():
                    span.set_attribute(key, value)

    async def _compose(self, task: str, ctx: Any, context: Any) -> list[Message]:
        messages: list[Message] = []
        if self.system:
            messages.append(Message(Role.SYSTEM, self.system))
        if self.grounder is not None:
            grounding = await self.grounder(ctx, task)
            if grounding:
                messages.append(Message(Role.SYSTEM, grounding, name="grounding"))
        messages.extend(_seed(context))
        messages.append(Message(Role.USER, task))
        return messages

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, model={self.model!r}, cognition={type(self.cognition).__name__})"
