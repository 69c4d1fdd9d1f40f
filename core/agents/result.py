"""What an agent run returns: ``AgentResult``, and ``StopReason`` for a run that ended early.

``output`` is the final answer's text (for a stopped run, the last text the model produced).
``usage`` sums every model call the run made. ``parsed`` is the typed answer when the agent declared
an ``output_type`` and the answer parsed. ``stopped`` is true when something other than a final
answer ended the run (``reason`` says what, ``error`` says why; ``provider_error`` is a provider
session that broke part-way, such as a CLI that exited early or wrote a line that cannot be read).
``messages`` is the transcript as the run left it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.contracts.types import Message, Usage

__all__ = ["AgentResult", "StopReason"]


class StopReason(StrEnum):
    """Why a run ended."""

    COMPLETED = "completed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CANCELLED = "cancelled"
    MAX_ITERATIONS = "max_iterations"
    INVALID_OUTPUT = "invalid_output"
    TERMINATED = "terminated"  # a TerminationCondition fired: the run's own graceful stop
    PROVIDER_ERROR = "provider_error"  # the provider's session broke part-way (a CLI cognition)


@dataclass(frozen=True, slots=True)
class AgentResult:
    """The outcome of one ``Agent.run``."""

    output: str
    usage: Usage = field(default_factory=Usage)
    parsed: Any = None
    reason: StopReason = StopReason.COMPLETED
    error: str | None = None
    messages: Sequence[Message] = ()
    model_calls: int = 0

    def __post_init__(self) -> None:
        if type(self.messages) is not tuple:
            object.__setattr__(self, "messages", tuple(self.messages))

    @property
    def stopped(self) -> bool:
        """True when the run ended without a final answer (budget, cancellation, iterations, bad output)."""
        return self.reason is not StopReason.COMPLETED
