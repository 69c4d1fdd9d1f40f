"""``run_agents``: the fan-out agents use, with child contexts and per-actor budgets carved first.

``await run_agents([AgentTask(agent, task), ...], ctx)`` runs every task concurrently (bounded by
``limit``) and returns their ``AgentResult`` s in input order. Before anything is dispatched each
task gets its own child context, so no child can starve another:

* its own ``Budget``: the task's ``budget=`` when given, else a share of what the parent has left:
  ``parent.remaining() / n`` of the cost ceiling (exact ``Decimal`` arithmetic, rounded down to the
  micro-dollar) and ``(max_calls - calls) // n`` calls, each part only when the parent has that
  ceiling. A parent without ceilings gives unlimited children.
* the parent's budget and meters as extra meters, so every call a child makes is charged to the
  parent's ledger and its tenant quota as well (``meter()`` charges ``ctx.all_meters``), and a
  parent ceiling still holds over the whole batch;
* a child cancellation token (cancelling the parent reaches every child; a child stopping does not
  stop its siblings), ``depth + 1``, and the parent's identity and services.

Outcomes: with ``best_effort=False`` (the default) a child that raises cancels its siblings and the
errors surface as an ``ExceptionGroup``, as ``gather_bounded`` does; with ``best_effort=True`` each
slot is its result or a ``Failure``. A child that runs out of its budget or is terminated is not a
failure: agents return those as stopped results. ``until=`` applies one ``TerminationCondition`` to
every child.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_DOWN
from typing import Any, Literal, TypeVar, overload

from core.agents.agent import Agent
from core.agents.result import AgentResult
from core.agents.termination import TerminationCondition
from core.contracts.errors import Failure
from core.execution.fanout import gather_best_effort, gather_bounded
from core.runtime.context import RunContext
from core.runtime.meters import MONEY_PLACES, Budget

__all__ = ["AgentTask", "carve_budgets", "child_context", "run_agents"]

_Context = TypeVar("_Context", bound=RunContext)


@dataclass(frozen=True)
class AgentTask:
    """One child of a fan-out: the agent, its task, and optionally its own budget and context."""

    agent: Agent
    task: str
    budget: Budget | None = None
    context: Any = None


def carve_budgets(parent: Budget, n: int) -> list[Budget]:
    """``n`` budgets that together fit in what ``parent`` has left (see the module notes)."""
    if n < 1:
        return []
    left = parent.remaining()
    share = (left / n).quantize(MONEY_PLACES, rounding=ROUND_DOWN) if left is not None else None
    calls = None
    if parent.max_calls is not None:
        calls = max(0, parent.max_calls - parent.calls) // n
    return [Budget(max_cost_usd=share, max_calls=calls) for _ in range(n)]


def child_context(parent: _Context, budget: Budget) -> _Context:
    """A context for one child: its own budget, charged to the parent's meters too.

    Of the parent's class, so the children of an ``InvokingContext`` keep their invoker.
    """
    return replace(
        parent,
        budget=budget,
        cancel=parent.cancel.child(),
        meters=[parent.budget, *parent.meters],
        depth=parent.depth + 1,
    )


@overload
async def run_agents(
    tasks: Sequence[AgentTask | tuple[Agent, str]],
    ctx: RunContext,
    *,
    limit: int | None = None,
    best_effort: Literal[False] = False,
    until: TerminationCondition | None = None,
) -> list[AgentResult]: ...


@overload
async def run_agents(
    tasks: Sequence[AgentTask | tuple[Agent, str]],
    ctx: RunContext,
    *,
    limit: int | None = None,
    best_effort: bool,
    until: TerminationCondition | None = None,
) -> list[AgentResult | Failure]: ...


async def run_agents(
    tasks: Sequence[AgentTask | tuple[Agent, str]],
    ctx: RunContext,
    *,
    limit: int | None = None,
    best_effort: bool = False,
    until: TerminationCondition | None = None,
) -> list[AgentResult] | list[AgentResult | Failure]:
    """Run every task concurrently in its own carved context; results in input order."""
    items = [t if isinstance(t, AgentTask) else AgentTask(*t) for t in tasks]
    unbudgeted = [item for item in items if item.budget is None]
    shares = iter(carve_budgets(ctx.budget, len(unbudgeted)))
    contexts = [
        child_context(ctx, item.budget if item.budget is not None else next(shares)) for item in items
    ]
    runs = [
        item.agent.run(item.task, child, item.context, until=until)
        for item, child in zip(items, contexts, strict=True)
    ]
    if best_effort:
        return await gather_best_effort(runs, limit)
    return await gather_bounded(runs, limit)
