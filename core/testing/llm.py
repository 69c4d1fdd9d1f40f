"""``FakeLLM``: a deterministic, offline ``LLMPort``, and the ``Turn`` s that script it.

Two families of behaviour, different on purpose once they run out of material:

* Rules for answering: a string (always that answer), a dict of substring matches (the first key
  found in the user text wins; no match answers the literal ``"{}"``), or a callable called with
  the keyword arguments ``system``, ``user`` and ``model``. A rule has nothing to run out of, so it
  answers every call.
* A script: ``FakeLLM.script([Turn(...), ...])`` answers call *n* with turn *n*. A script claims how
  many turns the run takes, so asking for one more raises ``ScriptExhausted``, naming both numbers,
  unless ``repeat_last=True`` says an unbounded loop is the point of the test.

``ScriptExhausted`` is a ``BaseException``, like ``asyncio.CancelledError``: the layers between the
fake and the test (a tool loop turning failures into messages, retry classifying faults) catch
``Exception`` on purpose, and every one of them would otherwise turn "the loop did not stop" into a
plausible answer.

Choices made here:

* The "user text" a rule sees is the content of the last ``user`` message; the "system text" is the
  system messages' contents joined by blank lines.
* ``stream`` is the primitive: the answer is sent in chunks of ``chunk_size`` characters, then one
  terminal delta carries the tool calls, usage and finish reason (``"tool_calls"`` when the turn has
  tool calls, otherwise ``"stop"``). ``chat`` is the collected stream.
* ``fail_times=n`` raises ``fail_exc`` on the first ``n`` calls, before the first delta (a
  pre-stream failure, the only kind a retry may repeat). A failed call still counts in ``calls`` but
  does not use up a turn of a script. The count lives on the instance, across runs.
* ``delay`` is a real ``asyncio.sleep`` before each call, for cancellation and timeout tests.
* ``complete()`` answers through the rule, never the script: on a scripted fake it returns ``"{}"``.
* ``tools=`` is accepted and ignored; the fake answers the same whatever was offered.
* Default usage per call: 10 input and 5 output tokens costing $0.0001, provider ``"fake"``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.contracts.ports import ChatFromStream
from core.contracts.types import (
    Delta,
    FinishReason,
    LLMResult,
    Message,
    Role,
    ToolCall,
    ToolSchema,
    Usage,
)

__all__ = ["DEFAULT_USAGE", "FakeLLM", "ScriptExhausted", "Turn"]

DEFAULT_USAGE = Usage(input_tokens=10, output_tokens=5, cost_usd=0.0001)
_UNMATCHED = "{}"

Responder = str | Mapping[str, str] | Callable[..., str]


class ScriptExhausted(BaseException):  # noqa: N818 - the name the documents use
    """A scripted ``FakeLLM`` was asked for more turns than its script has."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted reply: content, the tool calls it asks for, and optionally its usage."""

    content: str = ""
    tool_calls: Sequence[ToolCall] = ()
    usage: Usage | None = None

    def __post_init__(self) -> None:
        if type(self.tool_calls) is not tuple:
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


def _exhausted_message(turns: int, asked: int) -> str:
    return (
        f"FakeLLM script exhausted: the script has {turns} turn(s), but the agent asked for turn "
        f"{asked}. A loop that keeps calling the model after its script ran out is usually the bug "
        f"under test (a stop condition that never fires). Add Turn(...)s if {asked} calls are really "
        "expected, or pass FakeLLM.script([...], repeat_last=True) when the test drives an unbounded "
        "loop on purpose."
    )


class FakeLLM(ChatFromStream):
    """A scripted or rule-driven ``LLMPort`` that needs no key and no network."""

    def __init__(
        self,
        responses: Responder = _UNMATCHED,
        *,
        usage: Usage | None = None,
        fail_times: int = 0,
        fail_exc: BaseException | None = None,
        delay: float = 0.0,
        turns: Sequence[Turn] | None = None,
        repeat_last: bool = False,
        chunk_size: int = 8,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size!r}")
        self._responses = responses
        self._usage = usage if usage is not None else DEFAULT_USAGE
        self._fail_times = fail_times
        self._fail_exc = fail_exc if fail_exc is not None else TimeoutError("FakeLLM: injected failure")
        self._delay = delay
        self._turns = tuple(turns) if turns is not None else None
        self._repeat_last = repeat_last
        self._chunk = chunk_size
        self._turn_idx = 0
        self.calls = 0

    @classmethod
    def script(cls, turns: Sequence[Turn], *, repeat_last: bool = False, **options: Any) -> FakeLLM:
        """Answer call *n* with turn *n*; past the end raise ``ScriptExhausted`` unless ``repeat_last``."""
        return cls(turns=turns, repeat_last=repeat_last, **options)

    @property
    def turns_used(self) -> int:
        """How many scripted turns have been asked for (it keeps counting past the end)."""
        return self._turn_idx

    # ---- LLMPort -------------------------------------------------------------------------------

    async def stream(
        self,
        *,
        messages: Sequence[Message],
        model: str,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_hint: Any = None,
    ) -> AsyncIterator[Delta]:
        if self._delay:
            await asyncio.sleep(self._delay)
        self._enter()
        if self._turns is not None:
            turn = self._next_turn()
            content, tool_calls, usage = turn.content, turn.tool_calls, turn.usage or self._usage
        else:
            system, user = _split(messages)
            content, tool_calls, usage = self._answer(system, user, model), (), self._usage
        size = self._chunk
        for start in range(0, len(content), size):
            yield Delta(text=content[start : start + size], model=model, provider="fake")
        yield Delta(
            tool_calls=tool_calls,
            finish_reason=FinishReason.TOOL_CALLS if tool_calls else FinishReason.STOP,
            usage=usage,
            model=model,
            provider="fake",
        )

    async def complete(
        self,
        *,
        system: str,
        user: str,
        model: str,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> LLMResult:
        if self._delay:
            await asyncio.sleep(self._delay)
        self._enter()
        return LLMResult(
            content=self._answer(system, user, model),
            usage=self._usage,
            provider="fake",
            model=model,
            finish_reason=FinishReason.STOP,
        )

    # ---- internals -----------------------------------------------------------------------------

    def _enter(self) -> None:
        self.calls += 1
        if self.calls <= self._fail_times:
            raise self._fail_exc

    def _next_turn(self) -> Turn:
        turns = self._turns or ()
        index = self._turn_idx
        self._turn_idx += 1
        if index < len(turns):
            return turns[index]
        if self._repeat_last and turns:
            return turns[-1]
        raise ScriptExhausted(_exhausted_message(len(turns), index + 1))

    def _answer(self, system: str, user: str, model: str) -> str:
        responses = self._responses
        if isinstance(responses, str):
            return responses
        if isinstance(responses, Mapping):
            for key, answer in responses.items():
                if key in user:
                    return answer
            return _UNMATCHED
        return str(responses(system=system, user=user, model=model))


def _split(messages: Sequence[Message]) -> tuple[str, str]:
    system = "\n\n".join(m.content for m in messages if m.role == Role.SYSTEM)
    user = next((m.content for m in reversed(messages) if m.role == Role.USER), "")
    return system, user
