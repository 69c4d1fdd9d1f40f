"""Running one agent run to its end, checkpointing every step, and continuing one that was cut off.

The run drives the agent's cognition itself (``cognition.drive(AgentRun)``) rather than calling
``Agent.stream``, because it has to see the transcript at each step and because a resumed run must
start from a saved transcript instead of composing a new one. What ``Agent.stream`` does around the
cognition is done here the same way: the ``invoke_agent`` span, the first transcript (system
prompt, grounding, the input as the user message), and a budget or a cancellation ending the run
with a stopped result instead of an error.

Checkpoints, all through the ``checkpoint`` port, each one version above the last:

* when the run starts (saved by the manager before the run is acknowledged);
* when a resumed run takes over: the epoch moves on and a ``resumed`` event is recorded. This save
  is also the claim: of two processes resuming one run, only one can save it;
* before every tool call (the call is ``pending``; the transcript holds the model's answer), and
  after it (the transcript holds the result);
* at the end, with the terminal status, the output and the ``final`` event.

A save refused with ``CheckpointVersionConflict`` means another producer moved the run on; the
run stops at once, without running the tool it was about to run, and the conflict propagates to
the manager. Task cancellation (the process shutting down) propagates untouched and leaves the run
``running`` in its last checkpoint, to be resumed by the next process. Any other exception fails
the run (status ``failed``, ``error`` saying what happened).

Cancelling the run's token stops it at the next event (even mid-answer) or safe point.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from core.agents import AgentResult, AgentRun, ReActCognition, StopReason
from core.agents.cognition import Cognition
from core.contracts import genai
from core.contracts.genai import usage_attributes
from core.contracts.middleware import Middleware
from core.contracts.ports import Checkpoint, CheckpointPort, CheckpointStatus, StorePort, TracePort
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind, Usage
from core.execution.cancellation import CancellationToken, Cancelled
from core.policies import meter, retry, tracing
from core.runtime import Budget, Invoker, InvokingContext, MeterExceeded, Services
from core.state.stores import CheckpointVersionConflict

from .catalog import AgentSpec
from .feed import RESUMED, RunFeed, event_data
from .open_turn import last_assistant_turn, settle_open_turn
from .record import RunRecord, json_safe, tool_call_json, usage_json
from .tool_records import call_key, current_call_key, record_tool_results

log = logging.getLogger("keel.agents")


@dataclass(frozen=True)
class RunServices:
    """What every run of a process shares."""

    checkpoint: CheckpointPort
    store: StorePort | None
    trace: TracePort
    model_retries: int = 3
    tool_record_ttl: float | None = 7 * 24 * 3600.0
    # Extra chat middlewares for one run, innermost (nearest the model): spend limits, say.
    chat_policies: Callable[[RunRecord, AgentSpec], Sequence[Middleware]] | None = None
    # Extra tool middlewares for one run, innermost: human approval, say.
    tool_policies: Callable[[RunExecution], Sequence[Middleware]] | None = None


class RunExecution:
    """Drives one run; ``await execution.run()`` returns once the run is over in this process."""

    def __init__(
        self,
        record: RunRecord,
        spec: AgentSpec,
        services: RunServices,
        feed: RunFeed,
        token: CancellationToken,
        *,
        resumed: bool,
        tool_idle: asyncio.Event | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        self.record = record
        self.tool_idle = tool_idle
        self.stopping = stopping
        self.spec = spec
        self.services = services
        self.feed = feed
        self.token = token
        self.resumed = resumed
        self.ctx = self._context()
        self.agent_run = AgentRun(spec.agent, record.input, self.ctx, list(record.transcript))
        self.agent_run.usage = record.usage
        self.agent_run.model_calls = record.model_calls

    def _context(self) -> InvokingContext:
        record, services = self.record, self.services
        budget = Budget(
            max_cost_usd=Decimal(record.max_cost_usd) if record.max_cost_usd is not None else None,
            max_calls=record.max_calls,
        )
        if record.model_calls or Decimal(record.cost_usd):
            try:  # a resumed run has already spent this much
                budget.charge(Usage(cost_usd=float(Decimal(record.cost_usd))))
            except MeterExceeded:
                pass  # the next guard stops the run
            budget.calls = record.model_calls
            budget.usage = record.usage
        invoker = Invoker(
            llm=self.spec.llm,
            chat_middleware=[
                retry(services.model_retries),
                meter(),
                *(services.chat_policies(record, self.spec) if services.chat_policies else ()),
            ],
            tool_middleware=[
                meter(),
                tracing(),
                record_tool_results(services.store, ttl=services.tool_record_ttl, fence=self.fence),
                *(services.tool_policies(self) if services.tool_policies else ()),
            ],
        )
        return InvokingContext(
            budget=budget,
            services=Services(
                invoker=invoker, store=services.store, checkpointer=services.checkpoint, trace=services.trace
            ),
            correlation_id=record.run_id,
            cancel=self.token,
        )

    # -- the run -----------------------------------------------------------------------------------

    async def run(self) -> None:
        agent = self.spec.agent
        attributes = {
            genai.OPERATION_NAME: genai.OPERATION_INVOKE_AGENT,
            genai.AGENT_NAME: agent.name,
            genai.REQUEST_MODEL: agent.model,
            genai.CONVERSATION_ID: self.record.run_id,
            genai.PROVIDER_NAME: getattr(self.spec.llm, "provider_name", None) or None,
        }
        with self.ctx.trace.span(f"invoke_agent {agent.name}", "client", attributes) as span:
            if self.resumed:
                await self._take_over()
            try:
                result = await self._drive()
            except CheckpointVersionConflict:
                raise
            except Exception as exc:
                log.warning("agent run %s failed", self.record.run_id, exc_info=exc)
                await self._fail(exc)
                span.set_attribute("error.type", type(exc).__name__)
                return
            span.set_attribute("keel.agent.stop_reason", str(result.reason))
            for key, value in usage_attributes(result.usage).items():
                span.set_attribute(key, value)
            await self._finish(result)

    async def _take_over(self) -> None:
        record = self.record
        record.epoch += 1
        self.feed.epoch = record.epoch
        self.feed.publish(RESUMED, {"from_version": record.version, "epoch": record.epoch})
        await self.save()

    async def _drive(self) -> AgentResult:
        run = self.agent_run
        cognition = self.spec.agent.cognition
        try:
            self.ctx.check_cancelled()
            if not run.messages:
                run.messages = await self._compose()
            settling = settle_open_turn(run, self.record, self.services.store, cognition)
            async with aclosing(settling) as answers:
                async for event in answers:
                    await self.step(event)
            steps: Any = _continuing(cognition, run.model_calls).drive(run)
            async with aclosing(steps) as events:
                async for event in events:
                    if event.kind == StreamEventKind.FINAL:
                        result: AgentResult = event.result
                        return result
                    await self.step(event)
                    self.ctx.check_cancelled()
        except MeterExceeded as exc:
            return run.stopped(StopReason.BUDGET_EXHAUSTED, exc.reason).result  # type: ignore[no-any-return]
        except Cancelled as exc:
            return run.stopped(StopReason.CANCELLED, str(exc)).result  # type: ignore[no-any-return]
        raise RuntimeError(f"agent {self.spec.agent.name!r}: the cognition ended without a final event")

    async def _compose(self) -> list[Message]:
        agent, ctx = self.spec.agent, self.ctx
        messages: list[Message] = []
        with ctx.trace.span("compose", "compose"):
            if agent.system:
                messages.append(Message(Role.SYSTEM, agent.system))
            if agent.grounder is not None:
                grounding = await agent.grounder(ctx, self.record.input)
                if grounding:
                    messages.append(Message(Role.SYSTEM, grounding, name="grounding"))
            messages.append(Message(Role.USER, self.record.input))
        return messages

    # -- steps -------------------------------------------------------------------------------------

    async def step(self, event: StreamEvent) -> None:
        """Record one event; around a tool call, checkpoint before it runs and after it returned."""
        record = self.record
        kind = event.kind
        if kind == StreamEventKind.TOOL_CALL and event.tool_call is not None:
            turn = last_assistant_turn(self.agent_run.messages)
            key = call_key(record.run_id, turn, event.tool_call.id)
            record.pending = {"key": key, "turn": turn, "call": tool_call_json(event.tool_call)}
            self.feed.publish(str(kind), event_data(event))
            await self.save()
            current_call_key.set(key)  # read by the tool middleware that records the result
            if self.tool_idle is not None:
                self.tool_idle.clear()
            return
        if kind == StreamEventKind.TOOL_RESULT:
            current_call_key.set(None)
            record.pending = None
            self.feed.publish(str(kind), event_data(event))
            try:
                await self.save()
            finally:
                if self.tool_idle is not None:
                    self.tool_idle.set()
            if self.stopping is not None and self.stopping():
                # The process is shutting down and let this call finish: stop at this safe point,
                # as a cancelled task would, leaving the run ``running`` for the next process.
                raise asyncio.CancelledError
            return
        self.feed.publish(str(kind), event_data(event))

    async def save(self, status: CheckpointStatus | None = None) -> None:
        """Checkpoint the run as it stands, one version above the last."""
        record, run = self.record, self.agent_run
        record.transcript = list(run.messages)
        record.usage = run.usage
        record.model_calls = run.model_calls
        record.cost_usd = str(self.ctx.budget.spent())
        record.updated_at = time.time()
        target = status if status is not None else record.status
        checkpoint = Checkpoint(
            record.run_id, record.version + 1, record.to_state(), record.updated_at, target
        )
        await self.services.checkpoint.save(checkpoint)
        record.version += 1
        record.status = target

    async def fence(self) -> None:
        """Raise ``CheckpointVersionConflict`` if another process moved the run past this one's last
        checkpoint (it took the run over: its epoch is newer), so that nothing more is committed here."""
        record = self.record
        latest = await self.services.checkpoint.latest(record.run_id)
        if latest is not None and latest.version != record.version:
            epoch = latest.state.get("epoch") if hasattr(latest.state, "get") else None
            raise CheckpointVersionConflict(
                f"run {record.run_id!r}: checkpoint version {latest.version} (epoch {epoch}) was saved "
                f"since this process's version {record.version} (epoch {record.epoch}); this process "
                "lost the run and commits nothing more"
            )

    async def _finish(self, result: AgentResult) -> None:
        record = self.record
        if result.reason is StopReason.COMPLETED:
            status = CheckpointStatus.COMPLETED
        elif result.reason is StopReason.CANCELLED:
            status = CheckpointStatus.CANCELLED
        else:
            status = CheckpointStatus.FAILED
        record.output = result.output
        record.reason = str(result.reason)
        record.error = result.error
        record.pending = None
        data: dict[str, Any] = self._final_data(status)
        if result.parsed is not None:
            data["parsed"] = json_safe(result.parsed)
        self.feed.publish(str(StreamEventKind.FINAL), data)
        await self.save(status)

    async def _fail(self, exc: Exception) -> None:
        record = self.record
        record.output = self.agent_run.last_text or None
        record.reason = "error"
        record.error = f"{type(exc).__name__}: {exc}"
        record.pending = None
        self.feed.publish(str(StreamEventKind.FINAL), self._final_data(CheckpointStatus.FAILED))
        await self.save(CheckpointStatus.FAILED)

    def _final_data(self, status: CheckpointStatus) -> dict[str, Any]:
        record = self.record
        return {
            "status": str(status),
            "output": record.output,
            "reason": record.reason,
            "error": record.error,
            "usage": usage_json(self.agent_run.usage),
            "cost_usd": str(self.ctx.budget.spent()),
        }


def _continuing(cognition: Cognition, calls_done: int) -> Cognition:
    """The cognition for the rest of a run that already made ``calls_done`` model calls."""
    if isinstance(cognition, ReActCognition) and calls_done:
        return ReActCognition(cognition.tools, max_iterations=max(1, cognition.max_iterations - calls_done))
    return cognition
