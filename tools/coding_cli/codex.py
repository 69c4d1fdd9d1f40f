"""``CodexCliCognition`` and ``CodexCliSession``: agents that think with one-shot ``codex exec`` turns.

``codex exec`` answers one prompt and exits, so a spawn *is* a turn: ``codex exec --json
--skip-git-repo-check --model <agent.model> -`` starts a thread, ``codex exec resume --json ...
<thread_id> -`` continues one, and the prompt is written to stdin (the trailing ``-``), so it can
neither be mistaken for an option nor outgrow the argv limit. The agent's system messages are
written ahead of the task (``codex exec`` has no system-prompt flag); earlier transcript messages
are quoted before it, as for ``claude``. The spawn goes through a seam (``spawn=``): a
``SubprocessSpawn`` by default, a ``core.testing.FakeCodexCli`` in a test.

* ``CodexCliCognition`` runs each agent run on a fresh thread, or on ``thread_id=`` when given.
* ``CodexCliSession`` remembers the thread: its first run starts one (the id arrives first, in
  ``thread.started``, and is kept as ``.thread_id``) and every later run resumes it, one spawn each.
  Build it with ``thread_id=`` to continue a thread another process started (after a restart).

The events: ``thread.started`` becomes a ``step`` stream event whose ``tool_result`` is
``{"binary": "codex", "thread_id": ...}``; a completed ``agent_message`` item is a ``message_delta``
and the last one is the answer; every other item but ``reasoning`` (a command, a file change, an MCP
tool call, a web search, a to-do list) is a ``tool_call`` when it starts and a ``tool_result`` when
it completes; ``turn.completed`` ends the turn and carries its usage; ``turn.failed`` ends it as
``provider_error`` with the error's message. A top-level ``error`` event is remembered and only
reported if the turn then fails to complete (codex also uses it for reconnect notices).

Usage arrives last, in the CLI's own convention: ``input_tokens`` includes ``cached_input_tokens``,
and reasoning tokens are part of ``output_tokens``. It is read into a ``ModelUsage``, priced with
``prices`` (codex reports no cost; the defaults are list prices at the time of writing), converted
and charged to every meter of the run once per spawn. Meters are guarded before each spawn.

Malformed sessions end the run as ``provider_error`` with a reason naming the line, and are billed
for what was done: an unreadable line (not UTF-8, not complete JSON) or an event of unknown type is
noted and reading continues, so the ``turn.completed`` usage after it is still charged; a process
that exits without ``turn.completed`` (a non-zero exit part-way, or a clean exit with nothing) is
charged the call with no tokens, because codex reports none before the end of the turn.

Structured output: an answer that does not parse as the agent's ``output_type`` is sent back with
the validation error as a resumed turn (one more spawn), up to ``output_retries`` times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from core.agents.result import StopReason
from core.agents.session import AgentRun
from core.contracts.accounting import ModelUsage
from core.contracts.cli import CliInvocation, CliSpawnPort
from core.contracts.types import Message, Role, StreamEvent, StreamEventKind, ToolCall, Usage
from tools.coding_cli.claude import render_prompt
from tools.coding_cli.session import CliPrice, CliPrices, EventReader, reap, stderr_tail
from tools.coding_cli.spawn import SubprocessSpawn

__all__ = ["DEFAULT_CODEX_PRICES", "CodexCliCognition", "CodexCliSession", "codex_usage"]

KNOWN_EVENTS = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
    }
)
_QUIET_ITEMS = frozenset({"agent_message", "reasoning", "error"})
_RESULT_ONLY = frozenset({"aggregated_output", "exit_code", "status"})

_GPT5 = CliPrice.of("1.25", "10", "0.125")
DEFAULT_CODEX_PRICES = CliPrices(
    {
        "gpt-5-nano": CliPrice.of("0.05", "0.40", "0.005"),
        "gpt-5-mini": CliPrice.of("0.25", "2", "0.025"),
        "gpt-5": _GPT5,
        "o4-mini": CliPrice.of("1.10", "4.40", "0.275"),
        "*": _GPT5,
    }
)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def codex_usage(wire: Mapping[str, Any] | None) -> ModelUsage:
    """``turn.completed``'s usage (input inclusive of the cached prefix) as a ``ModelUsage``."""
    wire = wire or {}
    output = _int(wire.get("output_tokens"))
    prompt = _int(wire.get("input_tokens"))
    return ModelUsage(
        input_tokens=prompt,
        output_tokens=output,
        cache_read_tokens=min(_int(wire.get("cached_input_tokens")), prompt),
        reasoning_tokens=min(_int(wire.get("reasoning_output_tokens")), output),
    )


class _Turn:
    def __init__(self) -> None:
        self.thread_id: str | None = None
        self.text = ""
        self.answer: str | None = None
        self.usage: ModelUsage | None = None
        self.failed: str | None = None
        self.error: str | None = None
        self.problem: str | None = None
        self.exit_code = 0
        self.stderr = ""


class CodexCliCognition:
    """One ``codex exec`` spawn per turn; a fresh thread per run unless ``thread_id`` is given."""

    def __init__(
        self,
        *,
        spawn: CliSpawnPort | None = None,
        binary: str = "codex",
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        sandbox: str | None = None,
        extra_args: Sequence[str] = (),
        thread_id: str | None = None,
        prices: CliPrices | None = None,
        output_retries: int = 1,
        ignore_event_types: Iterable[str] = (),
    ) -> None:
        if output_retries < 0:
            raise ValueError(f"output_retries must not be negative, got {output_retries!r}")
        self.spawn: CliSpawnPort = spawn if spawn is not None else SubprocessSpawn()
        self.binary = binary
        self.cwd = cwd
        self.env = dict(env or {})
        self.sandbox = sandbox
        self.extra_args = tuple(extra_args)
        self.thread_id = thread_id
        self.prices = prices if prices is not None else DEFAULT_CODEX_PRICES
        self.output_retries = output_retries
        self.known_events = KNOWN_EVENTS | frozenset(ignore_event_types)

    def argv(self, model: str, thread_id: str | None = None) -> list[str]:
        """The command line of one turn: a new thread, or ``resume`` of ``thread_id``."""
        if thread_id is None:
            argv = [self.binary, "exec", "--json", "--skip-git-repo-check", "--model", model]
            if self.sandbox:
                argv += ["--sandbox", self.sandbox]
            return [*argv, *self.extra_args, "-"]
        argv = [self.binary, "exec", "resume", "--json", "--skip-git-repo-check", "--model", model]
        return [*argv, *self.extra_args, thread_id, "-"]

    async def drive(self, run: AgentRun) -> AsyncIterator[StreamEvent]:
        system, prompt = render_prompt(run.messages)
        if system:
            prompt = f"{system}\n\n{prompt}"
        thread_id = self.thread_id
        attempts = 0
        while True:
            turn = _Turn()
            async for event in self._spawn_turn(run, thread_id, prompt, turn):
                yield event
            if turn.thread_id is not None:
                thread_id = turn.thread_id
                self._remember(thread_id)
            reason = self._failure(turn, attempts)
            if reason is not None:
                yield run.stopped(StopReason.PROVIDER_ERROR, reason)
                return
            content = turn.answer or ""
            problem = run.output_error(content)
            if problem is not None and attempts < self.output_retries and thread_id is not None:
                attempts += 1
                run.messages.append(Message(Role.ASSISTANT, content))
                prompt = (
                    f"Your answer could not be used: {problem}. Answer again with only the JSON "
                    "object the task asks for."
                )
                run.messages.append(Message(Role.USER, prompt))
                continue
            run.messages.append(Message(Role.ASSISTANT, content))
            yield run.finish(content)
            return

    def _remember(self, thread_id: str) -> None:
        """A one-shot cognition keeps no thread between runs; ``CodexCliSession`` does."""

    async def _spawn_turn(
        self, run: AgentRun, thread_id: str | None, prompt: str, turn: _Turn
    ) -> AsyncIterator[StreamEvent]:
        ctx = run.ctx
        ctx.check_cancelled()
        run.guard_meters()
        process = await self.spawn(CliInvocation(self.argv(run.agent.model, thread_id), self.cwd, self.env))
        reader = EventReader(process, self.binary)
        waited = False
        started: dict[str, ToolCall] = {}
        try:
            await process.write(prompt.encode("utf-8"))
            await process.close_stdin()
            while True:
                ctx.check_cancelled()
                event = await reader.next()
                if event is None:
                    break
                for item in self._map(event, turn, reader, run, started):
                    yield item
            turn.exit_code = await process.wait()
            waited = True
            turn.stderr = stderr_tail(process)
        finally:
            if not waited:
                await reap(process)
        turn.problem = reader.problem
        run.bill(turn.usage.to_usage() if turn.usage is not None else Usage())

    def _map(
        self,
        event: Mapping[str, Any],
        turn: _Turn,
        reader: EventReader,
        run: AgentRun,
        started: dict[str, ToolCall],
    ) -> list[StreamEvent]:
        kind = event["type"]
        if kind == "thread.started":
            thread = event.get("thread_id")
            if isinstance(thread, str) and thread:
                turn.thread_id = thread
                payload = {"binary": "codex", "thread_id": thread}
                return [StreamEvent(StreamEventKind.STEP, text="thread started", tool_result=payload)]
            return []
        if kind == "turn.completed":
            wire = event.get("usage")
            usage = codex_usage(wire if isinstance(wire, Mapping) else None)
            turn.usage = dataclasses.replace(usage, cost_usd=self.prices.cost(run.agent.model, usage))
            return []
        if kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            turn.failed = str(message or "no detail")
            return []
        if kind == "error":
            turn.error = str(event.get("message") or "no detail")
            return []
        if kind in ("item.started", "item.completed"):
            item = event.get("item")
            if isinstance(item, Mapping):
                return self._item(kind, item, turn, run, started)
            return []
        if kind not in self.known_events:
            reader.note(f"codex wrote an event of unknown type {kind!r} on line {reader.line}")
        return []

    def _item(
        self, kind: str, item: Mapping[str, Any], turn: _Turn, run: AgentRun, started: dict[str, ToolCall]
    ) -> list[StreamEvent]:
        item_type = str(item.get("type", ""))
        item_id = str(item.get("id", ""))
        if item_type == "agent_message":
            text = item.get("text")
            if kind != "item.completed" or not isinstance(text, str):
                return []
            turn.answer = text
            piece = text if not turn.text else "\n\n" + text
            turn.text += piece
            return [run.text_event(piece, turn.text)]
        if item_type in _QUIET_ITEMS:
            return []
        events: list[StreamEvent] = []
        call = started.get(item_id)
        if call is None:
            arguments = {k: v for k, v in item.items() if k not in ("id", "type") and k not in _RESULT_ONLY}
            call = ToolCall(item_id, item_type, arguments)
            started[item_id] = call
            events.append(StreamEvent(StreamEventKind.TOOL_CALL, tool_call=call))
        if kind == "item.completed":
            events.append(StreamEvent(StreamEventKind.TOOL_RESULT, tool_call=call, tool_result=dict(item)))
        return events

    def _failure(self, turn: _Turn, attempts: int) -> str | None:
        where = f"turn {attempts + 1}"
        if turn.problem is not None:
            return turn.problem
        if turn.failed is not None:
            return f"codex reported the turn failed: {turn.failed}"
        if turn.usage is None:
            detail = f": {turn.error}" if turn.error else (f": {turn.stderr}" if turn.stderr else "")
            if turn.exit_code != 0:
                return f"codex exited with code {turn.exit_code} part-way through {where}{detail}"
            return f"codex's session ended without a turn.completed event ({where}){detail}"
        return None


class CodexCliSession(CodexCliCognition):
    """A conversation on one codex thread: the first run starts it, every later run resumes it.

    Not for concurrent runs: two runs at once would both resume (or both start) the thread.
    """

    def _remember(self, thread_id: str) -> None:
        self.thread_id = thread_id
