"""``FakeClaudeCli`` and ``FakeCodexCli``: the coding-agent CLIs, replayed at the spawn seam.

A CLI cognition does not talk to an ``LLMPort``; it launches a binary and parses the JSON lines the
binary writes. These doubles stand in for the launch (they satisfy ``CliSpawnPort``), so a test still
runs the cognition's real parsing, event mapping and budget charging. They share one replay
machinery and the value types of ``core.contracts.cli`` (``CliRun``, ``CliStderr``,
``CliInvocation``).

The two differ the way the binaries do:

* ``claude`` keeps one process open and answers a user message written to its stdin with a *turn*:
  events up to and including a ``result`` event. ``FakeClaudeCli`` serves its turns in order, one per
  stdin line, across however many spawns. ``FakeClaudeCli.replay(path)`` reads a recorded session
  (one JSON event a line) and splits it into turns after each ``result`` event.
* ``codex exec`` is one-shot: a spawn *is* a turn. ``FakeCodexCli`` serves one ``CliRun`` per spawn;
  ``codex_turn(...)`` builds a run with the event order a real turn has, and
  ``FakeCodexCli.answering("one", "two")`` is a script of such runs on one thread.

Both record ``.spawns`` (how many launches), ``.invocations`` (each ``CliInvocation``),
``.stdin`` (what was written to each process, one bytes list per spawn) and ``argv(n=-1)`` (the
argv of spawn ``n``, the last by default).

Rules shared by both, chosen to fail loudly:

* A script is a finite claim: asking for one turn more than it has raises ``ScriptExhausted`` (a
  ``BaseException``, as for ``FakeLLM``), naming both numbers, unless ``repeat_last=True``.
* A turn that ends without a ``result`` event (``claude``), and every ``codex`` run, ends the process
  after its last line: stdout reads ``b""`` and ``wait()`` returns the run's ``exit_code``. A
  ``claude`` turn that ends with its ``result`` leaves the process waiting for the next message;
  reading stdout then, with nothing asked, raises ``RuntimeError`` (a real process would block
  forever). Closing stdin ends the process with code 0.
* ``kill()`` ends the process at once: stdout reads ``b""`` and ``wait()`` returns ``-9``.
* Reading a line never awaits, so the fake is faster than real I/O: ``asyncio.wait_for`` cannot time
  out mid-stream, and cancellation reaches a cognition through ``ctx.check_cancelled()``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.contracts.cli import CliInvocation, CliLine, CliRun, CliStderr, encode_line
from core.testing.llm import ScriptExhausted

__all__ = ["DEFAULT_THREAD_ID", "FakeClaudeCli", "FakeCodexCli", "claude_turn", "codex_turn"]

DEFAULT_THREAD_ID = "0199a213-81c0-7800-8aa1-bbab2a035a53"
DEFAULT_SESSION_ID = "4f2c8a1e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
_KILLED = -9


def _is_result(line: CliLine) -> bool:
    return isinstance(line, Mapping) and line.get("type") == "result"


def _ends_with_result(run: CliRun) -> bool:
    stdout = [line for line in run.lines if not isinstance(line, CliStderr)]
    return bool(stdout) and _is_result(stdout[-1])


class _FakeProcess:
    """One launched fake: serves queued lines, records stdin, reports an exit code."""

    def __init__(self, owner: _ScriptedCli, index: int, on_message: Callable[[_FakeProcess], None]) -> None:
        self._owner = owner
        self._on_message = on_message
        self._queue: deque[CliLine] = deque()
        self._stderr: list[str] = []
        self._stdin: list[bytes] = owner.stdin[index]
        self._pending = b""
        self._stdin_closed = False
        self._ended = False
        self._stays_open = True
        self._run_exit = 0
        self.exit_code: int | None = None

    def serve(self, run: CliRun, *, stays_open: bool) -> None:
        self._queue.extend(run.lines)
        self._stays_open = stays_open
        self._run_exit = run.exit_code

    async def readline(self) -> bytes:
        while self._queue:
            line = self._queue.popleft()
            if isinstance(line, CliStderr):
                self._stderr.append(line.text)
                continue
            return encode_line(line)
        if self._ended:
            return b""
        if self._stays_open and not self._stdin_closed:
            raise RuntimeError(
                f"{type(self._owner).__name__}: stdout was read with no message pending; the turn "
                "ended with its result, and a real process would now block until the next message"
            )
        self._end(0 if self._stays_open else self._run_exit)
        return b""

    async def write(self, data: bytes) -> None:
        if self._stdin_closed:
            raise BrokenPipeError(f"{type(self._owner).__name__}: write after stdin was closed")
        self._stdin.append(data)
        self._pending += data
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            if line.strip():
                self._on_message(self)

    async def close_stdin(self) -> None:
        self._stdin_closed = True

    async def wait(self) -> int:
        if self.exit_code is None:
            if self._queue:
                raise RuntimeError(f"{type(self._owner).__name__}: wait() before stdout was read to its end")
            self._end(0 if self._stays_open else self._run_exit)
        assert self.exit_code is not None
        return self.exit_code

    def kill(self) -> None:
        self._queue.clear()
        if self.exit_code is None:
            self._end(_KILLED)

    def stderr_text(self) -> str:
        return "".join(self._stderr)

    def _end(self, code: int) -> None:
        self._ended = True
        self.exit_code = code


class _ScriptedCli:
    """The replay machinery both doubles share: a finite list of runs, served in order."""

    _unit = "turn"

    def __init__(self, runs: Iterable[CliRun | Iterable[CliLine]], *, repeat_last: bool = False) -> None:
        self._runs = tuple(CliRun.of(run) for run in runs)
        self._repeat_last = repeat_last
        self._served = 0
        self.spawns = 0
        self.invocations: list[CliInvocation] = []
        self.stdin: list[list[bytes]] = []

    @property
    def turns_used(self) -> int:
        """How many turns have been asked for (it keeps counting past the end)."""
        return self._served

    def argv(self, n: int = -1) -> list[str]:
        """The argv of spawn ``n`` (the last by default)."""
        if not self.invocations:
            raise IndexError(f"{type(self).__name__} has not been spawned yet")
        return list(self.invocations[n].argv)

    async def __call__(self, invocation: CliInvocation) -> _FakeProcess:
        if not isinstance(invocation, CliInvocation):
            raise TypeError(f"spawn takes a CliInvocation, got {type(invocation).__name__}")
        self.spawns += 1
        self.invocations.append(invocation)
        self.stdin.append([])
        process = _FakeProcess(self, len(self.stdin) - 1, self._on_message)
        self._on_spawn(process)
        return process

    def _next_run(self) -> CliRun:
        index = self._served
        self._served += 1
        if index < len(self._runs):
            return self._runs[index]
        if self._repeat_last and self._runs:
            return self._runs[-1]
        raise ScriptExhausted(
            f"{type(self).__name__} script exhausted: the script has {len(self._runs)} {self._unit}(s), "
            f"but the agent asked for {self._unit} {index + 1}. A cognition that keeps going after its "
            "recording ran out is usually the bug under test; add runs if it is really expected, or "
            "pass repeat_last=True when the test drives an unbounded loop on purpose."
        )

    def _on_spawn(self, process: _FakeProcess) -> None:
        raise NotImplementedError

    def _on_message(self, process: _FakeProcess) -> None:
        raise NotImplementedError


class FakeClaudeCli(_ScriptedCli):
    """The ``claude`` binary in stream-JSON mode: one turn per message written to stdin."""

    @classmethod
    def script(
        cls, turns: Sequence[CliRun | Iterable[CliLine]], *, repeat_last: bool = False
    ) -> FakeClaudeCli:
        """Serve ``turns`` in order, one per user message; see the module notes."""
        return cls(turns, repeat_last=repeat_last)

    @classmethod
    def replay(cls, path: Path | str, *, repeat_last: bool = False) -> FakeClaudeCli:
        """Replay a recorded session (JSON lines), split into turns after each ``result`` event.

        A line that is not a JSON object is kept as the raw text it is, so a recording of a broken
        session replays broken. Blank lines are skipped.
        """
        turns: list[list[CliLine]] = [[]]
        for raw in Path(path).read_bytes().splitlines():
            if not raw.strip():
                continue
            line: CliLine
            try:
                decoded = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw
            else:
                try:
                    value = json.loads(decoded)
                except json.JSONDecodeError:
                    value = None
                line = value if isinstance(value, dict) else decoded
            turns[-1].append(line)
            if _is_result(line):
                turns.append([])
        if not turns[-1]:
            turns.pop()
        return cls(turns, repeat_last=repeat_last)

    def _on_spawn(self, process: _FakeProcess) -> None:
        process.serve(CliRun(), stays_open=True)

    def _on_message(self, process: _FakeProcess) -> None:
        run = self._next_run()
        process.serve(run, stays_open=_ends_with_result(run) and run.exit_code == 0)


class FakeCodexCli(_ScriptedCli):
    """``codex exec --json``: each spawn is one turn, answered by the next run of the script."""

    @classmethod
    def script(cls, *runs: CliRun | Sequence[CliRun], repeat_last: bool = False) -> FakeCodexCli:
        """One run per spawn, in order: ``script(run1, run2)`` or ``script([run1, run2])``."""
        flat: list[CliRun] = []
        for run in runs:
            if isinstance(run, CliRun):
                flat.append(run)
            else:
                flat.extend(CliRun.of(item) for item in run)
        return cls(flat, repeat_last=repeat_last)

    @classmethod
    def answering(cls, *texts: str, thread_id: str = DEFAULT_THREAD_ID) -> FakeCodexCli:
        """A script of ``codex_turn(text=...)`` runs, all on one thread (a session resuming it)."""
        return cls([codex_turn(text=text, thread_id=thread_id) for text in texts])

    def _on_spawn(self, process: _FakeProcess) -> None:
        process.serve(self._next_run(), stays_open=False)

    def _on_message(self, process: _FakeProcess) -> None:
        return None  # the prompt is in argv; stdin is only recorded


def codex_turn(
    *,
    text: str = "",
    usage: tuple[int, int, int] = (10, 0, 5),
    thread_id: str = DEFAULT_THREAD_ID,
    items: Sequence[Mapping[str, Any]] = (),
    exit_code: int = 0,
) -> CliRun:
    """One ``codex exec --json`` turn, in the order the binary writes it.

    ``thread.started`` first (a session resumes by that id), then ``turn.started``, each of ``items``
    as ``item.started`` / ``item.completed`` (a mapping with at least ``type``; ids are assigned),
    the answer as a completed ``agent_message`` item, and ``turn.completed`` last, carrying
    ``usage``: ``(input_tokens, cached_input_tokens, output_tokens)`` in the CLI's own convention,
    where input includes the cached prefix. Converting that is the cognition's job, so it is not
    done here.
    """
    input_tokens, cached, output = usage
    lines: list[CliLine] = [
        {"type": "thread.started", "thread_id": thread_id},
        {"type": "turn.started"},
    ]
    for number, item in enumerate(items):
        body = {"id": f"item_{number}", **dict(item)}
        lines.append({"type": "item.started", "item": {**body, "status": "in_progress"}})
        lines.append({"type": "item.completed", "item": {"status": "completed", **body}})
    lines.append(
        {
            "type": "item.completed",
            "item": {"id": f"item_{len(items)}", "type": "agent_message", "text": text},
        }
    )
    lines.append(
        {
            "type": "turn.completed",
            "usage": {"input_tokens": input_tokens, "cached_input_tokens": cached, "output_tokens": output},
        }
    )
    return CliRun(lines, exit_code)


def claude_turn(
    *,
    text: str = "",
    usage: tuple[int, int, int, int] = (10, 0, 0, 5),
    cost_usd: float | str = "0.0001",
    session_id: str = DEFAULT_SESSION_ID,
    model: str = "claude-sonnet-4-5",
    tool_uses: Sequence[tuple[str, str, Mapping[str, Any], str]] = (),
    init: bool = True,
) -> CliRun:
    """One ``claude`` stream-JSON turn: ``system``/``init`` (unless ``init=False``), the messages, ``result``.

    ``usage`` is ``(input_tokens, cache_read_input_tokens, cache_creation_input_tokens,
    output_tokens)`` in the Anthropic convention the CLI reports, where ``input_tokens`` excludes the
    cached parts. Each of ``tool_uses`` is ``(id, name, input, result_text)``: an assistant
    ``tool_use`` block answered by a ``user`` ``tool_result`` block. ``cost_usd`` is the result's
    ``total_cost_usd``: the session's running total, as the binary reports it.
    """
    input_tokens, cache_read, cache_write, output = usage
    wire_usage = {
        "input_tokens": input_tokens,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
        "cache_creation": {"ephemeral_5m_input_tokens": cache_write, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output,
    }
    lines: list[CliLine] = []
    if init:
        lines.append(
            {"type": "system", "subtype": "init", "session_id": session_id, "model": model, "tools": []}
        )
    for number, (call_id, name, arguments, result_text) in enumerate(tool_uses):
        lines.append(
            {
                "type": "assistant",
                "session_id": session_id,
                "message": {
                    "id": f"msg_tool_{number}",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)}],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "session_id": session_id,
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result_text}],
                },
            }
        )
    lines.append(
        {
            "type": "assistant",
            "session_id": session_id,
            "message": {
                "id": "msg_answer",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "usage": wire_usage,
            },
        }
    )
    lines.append(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 1 + len(tool_uses),
            "result": text,
            "session_id": session_id,
            "total_cost_usd": float(cost_usd),
            "usage": wire_usage,
        }
    )
    return CliRun(lines)
