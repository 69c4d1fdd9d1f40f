"""What the agents domain accepts over HTTP.

A run starts from an ``input`` (the task, 1 to 100,000 characters) and an optional ``budget``:
``max_cost_usd`` (dollars, a number or a decimal string, at least 0) and ``max_calls`` (model calls,
at least 0). A run whose budget is spent stops with reason ``budget_exhausted``. Unknown fields are
refused, so a misspelt ``max_cost`` is an error instead of an unlimited budget.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunBudget(BaseModel):
    """Ceilings for one run; a missing one is unlimited."""

    model_config = ConfigDict(extra="forbid")

    max_cost_usd: Decimal | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_calls: int | None = Field(default=None, ge=0)


class StartRunRequest(BaseModel):
    """``POST /agents/{name}/runs``."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=100_000)
    budget: RunBudget | None = None


class ApprovalRequest(BaseModel):
    """``POST /agents/runs/{run_id}/approval``: approve or deny the tool call the run waits on,
    optionally with edited ``arguments`` (the tool then runs with those instead)."""

    model_config = ConfigDict(extra="forbid")

    approve: bool
    arguments: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=1000)
