"""``TerminationCondition``: a graceful stop a run *returns*, distinct from cancellation and ceilings.

Three ways a run can end early, and they are kept apart on purpose:

* cancellation (``ctx.cancel``) is an abort from outside: the run raises ``Cancelled`` at its next
  safe point and ends as ``cancelled``;
* a ceiling (a ``Budget``, a ``Quota``) is a limit crossed: ``MeterExceeded``, ending as
  ``budget_exhausted``;
* a termination condition is the run's own success criterion: "stop once this holds". It is checked
  on every stream event of the run, and when it fires the cognition is closed there and the run ends
  with reason ``terminated``, the text produced so far and the usage spent. Nothing is raised.

A condition is any callable ``(event, run) -> str | None`` (the reason to stop, or ``None`` to go
on); ``TerminationCondition`` is a base class that adds ``|`` (either) and ``&`` (both) and a
readable name. The shipped ones: ``TextMentions(text)`` (the answer so far contains ``text``),
``MaxModelCalls(n)`` (``n`` model calls were made: a count the run chose, not a budget) and
``StopWhen(predicate, reason)`` for anything else. Pass one as ``Agent.run(..., until=...)`` /
``Agent.stream(..., until=...)``, or to ``run_agents(..., until=...)`` for every child.

A condition is not checked on the ``final`` event: a run that already finished is not "terminated".
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core.contracts.types import StreamEvent, StreamEventKind

if TYPE_CHECKING:
    from core.agents.session import AgentRun

__all__ = ["MaxModelCalls", "StopWhen", "TerminationCondition", "TextMentions"]


class TerminationCondition:
    """Base for conditions: ``check(event, run)`` returns the reason to stop, or ``None``."""

    def check(self, event: StreamEvent, run: AgentRun) -> str | None:
        raise NotImplementedError

    def __call__(self, event: StreamEvent, run: AgentRun) -> str | None:
        return self.check(event, run)

    def __or__(self, other: Any) -> TerminationCondition:
        return _Either(self, other)

    def __and__(self, other: Any) -> TerminationCondition:
        return _Both(self, other)


class _Either(TerminationCondition):
    def __init__(self, first: Any, second: Any) -> None:
        self._first, self._second = first, second

    def check(self, event: StreamEvent, run: AgentRun) -> str | None:
        result: str | None = self._first(event, run)
        return result if result is not None else self._second(event, run)


class _Both(TerminationCondition):
    def __init__(self, first: Any, second: Any) -> None:
        self._first, self._second = first, second

    def check(self, event: StreamEvent, run: AgentRun) -> str | None:
        first = self._first(event, run)
        if first is None:
            return None
        second = self._second(event, run)
        return None if second is None else f"{first} and {second}"


class TextMentions(TerminationCondition):
    """Stop once the answer so far contains ``text``."""

    def __init__(self, text: str) -> None:
        if not text:
            raise ValueError("TextMentions needs a non-empty text")
        self.text = text
        self._seen: weakref.WeakKeyDictionary[AgentRun, str] = weakref.WeakKeyDictionary()

    def check(self, event: StreamEvent, run: AgentRun) -> str | None:
        if event.kind != StreamEventKind.MESSAGE_DELTA:
            return None
        seen = self._seen.get(run, "") + event.text
        if self.text in seen:
            self._seen.pop(run, None)
            return f"the answer mentions {self.text!r}"
        # Only the tail that could still start a match is kept.
        self._seen[run] = seen[-(len(self.text) - 1) :] if len(self.text) > 1 else ""
        return None


class MaxModelCalls(TerminationCondition):
    """Stop once the run has made ``n`` model calls (its own choice of length, not a budget)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"MaxModelCalls needs n >= 1, got {n!r}")
        self.n = n

    def check(self, event: StreamEvent, run: AgentRun) -> str | None:
        if run.model_calls >= self.n:
            return f"{run.model_calls} model call(s) made (the limit is {self.n})"
        return None


class StopWhen(TerminationCondition):
    """Stop when ``predicate(event, run)`` is true, with ``reason``."""

    def __init__(self, predicate: Callable[[StreamEvent, AgentRun], bool], reason: str) -> None:
        self._predicate = predicate
        self.reason = reason

    def check(self, event: StreamEvent, run: AgentRun) -> str | None:
        return self.reason if self._predicate(event, run) else None
