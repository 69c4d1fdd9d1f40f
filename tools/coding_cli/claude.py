"""``ClaudeCliCognition``: an agent that thinks by driving the ``claude`` binary in stream-JSON mode.

One run is one spawn of ``claude -p --input-format stream-json --output-format stream-json
--verbose --model <agent.model>`` (plus the options below). The task goes in as one user message on
stdin; the binary runs its own tool loop and writes events until a ``result`` event ends the turn.
The spawn goes through a seam (``spawn=``, a ``CliSpawnPort``): ``SubprocessSpawn`` by default, a
``core.testing.FakeClaudeCli`` in a test. The mapping onto Keel's run:

* ``system``/``init`` gives the session id and model: a ``step`` stream event whose ``tool_result``
  is ``{"binary": "claude", "session_id": ...}`` (pass it back as ``resume=`` to continue the
  conversation in a later run).
* ``assistant`` messages: each ``text`` block is a ``message_delta`` (with the typed partial when the
  agent declares an ``output_type``), each ``tool_use`` block a ``tool_call``; ``user`` messages'
  ``tool_result`` blocks are ``tool_result`` events. The tools are the binary's own; Keel's tool
  middleware does not see them.
* ``result`` with ``subtype`` ``success`` is the final answer (its ``result`` text). Any other subtype
  or ``is_error`` ends the run as ``provider_error`` with what the binary said.
* The agent's system messages become ``--append-system-prompt``; earlier transcript messages are
  written ahead of the task as a quoted conversation.

Usage and the budget. The CLI reports usage in the Anthropic convention (``input_tokens`` excludes
cache reads and cache writes; cache writes split into five-minute and one-hour buckets) and a cost
(``total_cost_usd``). Both are read into a ``ModelUsage``, converted, and charged to every meter of
the run (``ctx.all_meters``) when the turn ends: the cognition does not go through the invoker, so
it is its own ``meter()``. The meters are guarded before the spawn, and a budget with a cost ceiling
is passed on as ``--max-budget-usd`` (what is left of it), so the binary stops itself too. The
``result`` usage and cost are the session's running totals: each turn is charged their increase.

Malformed sessions end the run as ``provider_error`` with a reason naming the line, and are billed
for what was done: a line that is not valid UTF-8, is not complete JSON (truncated), or has an
unknown ``type`` is noted and reading continues to the ``result`` (whose cost is then charged); a
session that ends without a ``result`` (a non-zero exit part-way, or a clean exit with nothing) is
charged the usage its ``assistant`` messages reported, priced with ``prices``. Unknown event types
are a problem on purpose, so a format change is seen; ``ignore_event_types`` lists more to accept.

Structured output: when the agent has an ``output_type`` and the answer does not parse, the
validation error is sent back on the same process as the next user message, up to
``output_retries`` times (default 1), before the run ends as ``invalid_output``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from core.agents.result import StopReason
from core.agents.session import AgentRun
from core.contracts.accounting import ModelUsage
from core.contracts.cli import CliInvocation, CliProcess, CliSpawnPort
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind, ToolCall
from tools.coding_cli.session import CliPrice, CliPrices, EventReader, reap, stderr_tail
from tools.coding_cli.spawn import SubprocessSpawn

__all__ = ["DEFAULT_CLAUDE_PRICES", "ClaudeCliCognition", "claude_usage", "render_prompt"]

KNOWN_EVENTS = frozenset({"system", "assistant", "user", "result", "stream_event"})

_SONNET = CliPrice.of("3", "15", "0.30", "3.75", "6")
DEFAULT_CLAUDE_PRICES = CliPrices(
    {
        "claude-opus-4-0": CliPrice.of("15", "75", "1.50", "18.75", "30"),
        "claude-opus-4-1": CliPrice.of("15", "75", "1.50", "18.75", "30"),
        "claude-opus": CliPrice.of("5", "25", "0.50", "6.25", "10"),
        "claude-sonnet": _SONNET,
        "claude-haiku": CliPrice.of("1", "5", "0.10", "1.25", "2"),
        "*": _SONNET,
    }
)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def claude_usage(wire: Mapping[str, Any] | None, cost_usd: Decimal = Decimal(0)) -> ModelUsage:
    """The CLI's usage object (Anthropic convention) as a ``ModelUsage``."""
    wire = wire or {}
    uncached = _int(wire.get("input_tokens"))
    cache_read = _int(wire.get("cache_read_input_tokens"))
    cache_write = _int(wire.get("cache_creation_input_tokens"))
    buckets = wire.get("cache_creation")
    one_hour = _int(buckets.get("ephemeral_1h_input_tokens")) if isinstance(buckets, Mapping) else 0
    one_hour = min(one_hour, cache_write)
    return ModelUsage(
        input_tokens=uncached + cache_read + cache_write,
        output_tokens=_int(wire.get("output_tokens")),
        cache_read_tokens=cache_read,
        cache_write_5m_tokens=cache_write - one_hour,
        cache_write_1h_tokens=one_hour,
        cost_usd=cost_usd,
    )


def _increase(now: ModelUsage, before: ModelUsage) -> ModelUsage:
    """``now - before`` for running totals (a total that went down counts as no increase)."""

    def up(name: str) -> int:
        return max(0, int(getattr(now, name)) - int(getattr(before, name)))

    five = up("cache_write_5m_tokens")
    hour = up("cache_write_1h_tokens")
    read = up("cache_read_tokens")
    return ModelUsage(
        input_tokens=max(up("input_tokens"), read + five + hour),
        output_tokens=up("output_tokens"),
        cache_read_tokens=read,
        cache_write_5m_tokens=five,
        cache_write_1h_tokens=hour,
        cost_usd=max(Decimal(0), now.cost_usd - before.cost_usd),
    )


def render_prompt(messages: Sequence[Message]) -> tuple[str, str]:
    """``(system, prompt)`` for a CLI: system messages joined, the rest as one user message."""
    system = "\n\n".join(m.content for m in messages if m.role == Role.SYSTEM and m.content)
    rest = [m for m in messages if m.role != Role.SYSTEM]
    if not rest:
        return system, ""
    *earlier, task = rest
    if not earlier:
        return system, task.content
    quoted = "\n\n".join(f"{m.role}: {m.content}" for m in earlier)
    return system, f"The conversation so far:\n\n{quoted}\n\n---\n\n{task.content}"


def _user_line(text: str) -> bytes:
    message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")


def _tool_result_text(content: Any) -> Any:
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        return "".join(texts) if len(texts) == len(content) else content
    return content


class _Turn:
    """What one turn of the session produced."""

    def __init__(self) -> None:
        self.text = ""
        self.result: dict[str, Any] | None = None
        self.estimates: dict[str, Mapping[str, Any]] = {}
        self.model: str | None = None


class ClaudeCliCognition:
    """Drives one ``claude`` session per run; see the module notes for the mapping and billing."""

    def __init__(
        self,
        *,
        spawn: CliSpawnPort | None = None,
        binary: str = "claude",
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        permission_mode: str | None = None,
        allowed_tools: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        resume: str | None = None,
        prices: CliPrices | None = None,
        output_retries: int = 1,
        ignore_event_types: Iterable[str] = (),
        close_grace_s: float = 5.0,
    ) -> None:
        if output_retries < 0:
            raise ValueError(f"output_retries must not be negative, got {output_retries!r}")
        self.spawn: CliSpawnPort = spawn if spawn is not None else SubprocessSpawn()
        self.binary = binary
        self.cwd = cwd
        self.env = dict(env or {})
        self.permission_mode = permission_mode
        self.allowed_tools = tuple(allowed_tools)
        self.extra_args = tuple(extra_args)
        self.resume = resume
        self.prices = prices if prices is not None else DEFAULT_CLAUDE_PRICES
        self.output_retries = output_retries
        self.known_events = KNOWN_EVENTS | frozenset(ignore_event_types)
        self.close_grace_s = close_grace_s

    def argv(self, run: AgentRun) -> list[str]:
        """The command line this run spawns."""
        argv = [self.binary, "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
        argv += ["--verbose", "--model", run.agent.model]
        system, _ = render_prompt(run.messages)
        if system:
            argv += ["--append-system-prompt", system]
        if self.permission_mode:
            argv += ["--permission-mode", self.permission_mode]
        if self.allowed_tools:
            argv += ["--allowedTools", ",".join(self.allowed_tools)]
        if self.resume:
            argv += ["--resume", self.resume]
        remaining = getattr(run.ctx.budget, "remaining", None)
        left = remaining() if callable(remaining) else None
        if left is not None:
            argv += ["--max-budget-usd", str(left)]
        return [*argv, *self.extra_args]

    async def drive(self, run: AgentRun) -> AsyncIterator[StreamEvent]:
        ctx = run.ctx
        ctx.check_cancelled()
        run.guard_meters()
        process = await self.spawn(CliInvocation(self.argv(run), self.cwd, self.env))
        reader = EventReader(process, self.binary)
        billed = ModelUsage()
        closed = False
        try:
            _, prompt = render_prompt(run.messages)
            attempts = 0
            while True:
                turn = _Turn()
                await process.write(_user_line(prompt))
                async for event in self._turn(run, reader, turn):
                    yield event
                billed = self._bill(run, turn, billed)
                if reader.problem is not None:
                    yield run.stopped(StopReason.PROVIDER_ERROR, reader.problem)
                    return
                result = turn.result
                if result is None:
                    code = await process.wait()
                    closed = True
                    yield run.stopped(StopReason.PROVIDER_ERROR, self._ended_early(process, code, attempts))
                    return
                if result.get("is_error") or result.get("subtype") != "success":
                    said = result.get("result") or result.get("errors") or "no detail"
                    reason = f"claude reported {result.get('subtype')!r}: {said}"
                    yield run.stopped(StopReason.PROVIDER_ERROR, reason)
                    return
                answer = result.get("result")
                content = answer if isinstance(answer, str) else turn.text
                problem = run.output_error(content)
                if problem is not None and attempts < self.output_retries:
                    attempts += 1
                    run.messages.append(Message(Role.ASSISTANT, content))
                    prompt = (
                        f"Your answer could not be used: {problem}. Answer again with only the JSON "
                        "object the task asks for."
                    )
                    run.messages.append(Message(Role.USER, prompt))
                    continue
                run.messages.append(Message(Role.ASSISTANT, content))
                await process.close_stdin()
                try:
                    await asyncio.wait_for(process.wait(), self.close_grace_s)
                    closed = True
                except TimeoutError:
                    pass
                yield run.finish(content)
                return
        finally:
            if not closed:
                await reap(process)

    async def _turn(  # noqa: C901  one branch per event type of the CLI's stream, in stream order
        self, run: AgentRun, reader: EventReader, turn: _Turn
    ) -> AsyncIterator[StreamEvent]:
        ctx = run.ctx
        calls: dict[str, ToolCall] = {}
        while True:
            ctx.check_cancelled()
            event = await reader.next()
            if event is None:
                return
            kind = event["type"]
            if kind == "result":
                turn.result = event
                return
            if kind == "system":
                if event.get("subtype") == "init":
                    turn.model = event.get("model") if isinstance(event.get("model"), str) else None
                    payload = {"binary": "claude", "session_id": event.get("session_id")}
                    yield StreamEvent(StreamEventKind.STEP, text="session started", tool_result=payload)
            elif kind == "assistant":
                message = event.get("message")
                if not isinstance(message, Mapping):
                    continue
                usage = message.get("usage")
                if isinstance(usage, Mapping):
                    turn.estimates[str(message.get("id", len(turn.estimates)))] = usage
                if isinstance(message.get("model"), str):
                    turn.model = message["model"]
                for block in message.get("content") or ():
                    if not isinstance(block, Mapping):
                        continue
                    if block.get("type") == "text" and block.get("text"):
                        piece = block["text"] if not turn.text else "\n\n" + block["text"]
                        turn.text += piece
                        yield run.text_event(piece, turn.text)
                    elif block.get("type") == "tool_use":
                        call = ToolCall(
                            str(block.get("id", "")), str(block.get("name", "")), block.get("input") or {}
                        )
                        calls[call.id] = call
                        yield StreamEvent(StreamEventKind.TOOL_CALL, tool_call=call)
            elif kind == "user":
                message = event.get("message")
                content = message.get("content") if isinstance(message, Mapping) else None
                for block in content if isinstance(content, list) else ():
                    if isinstance(block, Mapping) and block.get("type") == "tool_result":
                        call_id = str(block.get("tool_use_id", ""))
                        call = calls.get(call_id, ToolCall(call_id, "unknown"))
                        yield StreamEvent(
                            StreamEventKind.TOOL_RESULT,
                            tool_call=call,
                            tool_result=_tool_result_text(block.get("content")),
                        )
            elif kind not in self.known_events:
                reader.note(f"claude wrote an event of unknown type {kind!r} on line {reader.line}")

    def _bill(self, run: AgentRun, turn: _Turn, billed: ModelUsage) -> ModelUsage:
        """Charge the turn (its increase of the session's totals, or an estimate); the new totals."""
        result = turn.result
        if result is not None and isinstance(result.get("usage"), Mapping):
            cost = result.get("total_cost_usd")
            amount = Decimal(str(cost)) if isinstance(cost, int | float) and cost >= 0 else None
            totals = claude_usage(result["usage"], Decimal(0))
            if amount is None:
                amount = billed.cost_usd + self.prices.cost(
                    turn.model or run.agent.model, _increase(totals, billed)
                )
            totals = dataclasses.replace(totals, cost_usd=amount)
            run.bill(_increase(totals, billed).to_usage())
            return totals
        spent = ModelUsage()
        for usage in turn.estimates.values():
            spent = spent + claude_usage(usage)
        model = turn.model or run.agent.model
        spent = dataclasses.replace(spent, cost_usd=self.prices.cost(model, spent))
        run.bill(spent.to_usage())
        return billed + spent

    def _ended_early(self, process: CliProcess, code: int, attempts: int) -> str:
        where = f"turn {attempts + 1}"
        if code != 0:
            tail = stderr_tail(process)
            detail = f": {tail}" if tail else ""
            return f"claude exited with code {code} part-way through {where}{detail}"
        return f"claude's session ended without a result event ({where})"
