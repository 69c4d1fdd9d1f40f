"""The durable-run runtime: agent runs that are checkpointed at every step, leased to one process
at a time, followed as events, cancelled, and resumed by another process after a crash.

Declaring an agent is one import::

    from core.runs import catalog_for

    catalog_for(container).declare(agent, llm=llm, description="...")

The parts, one module each: the agents a kernel offers (:mod:`~core.runs.catalog`), one run as
plain data (:mod:`~core.runs.record`) and as a stream of numbered events (:mod:`~core.runs.feed`),
driving a run step by step (:mod:`~core.runs.execution`) and settling the tool calls a crash cut off
(:mod:`~core.runs.open_turn`), tool results recorded under idempotency keys
(:mod:`~core.runs.tool_records`), human approval (:mod:`~core.runs.approval`), the run index and
its leases (:mod:`~core.runs.index`, over the ``db`` port and the ``agent_runs`` table of
``migrations/agents``), the runs of one process (:mod:`~core.runs.manager`), runs that start by
themselves (:mod:`~core.runs.triggers`) and the tracing adapter (:mod:`~core.runs.tracing`).

Rule: this package imports only the standard library and ``core``, and talks to the outside only
through ports (``checkpoint``, ``store``, ``db``, a tracer); it never imports ``tools`` or
``domains``. The HTTP surface over it, and what is really one domain's (who may read a run, spend
limits), live in ``domains/agents``.

Being ``core``, these modules are not reloaded while the service runs: live reload re-imports
plugin files only (:mod:`core.reloader`), so a change here takes effect at the next start.
"""

from core.agents.tool_calls import is_side_effecting
from core.runs.approval import approval_key, approval_policy, awaiting, decide
from core.runs.catalog import AgentCatalog, AgentSpec, catalog_for
from core.runs.execution import RunExecution, RunServices
from core.runs.index import DEFAULT_LEASE_SECONDS, RunIndex
from core.runs.manager import RunManager, RunSettings
from core.runs.record import RunRecord
from core.runs.tool_records import idempotency_key
from core.runs.tracing import trace_for
from core.runs.triggers import Trigger, TriggerBook, manager_for, publish_manager, run_id_for, triggers_for

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "AgentCatalog",
    "AgentSpec",
    "RunExecution",
    "RunIndex",
    "RunManager",
    "RunRecord",
    "RunServices",
    "RunSettings",
    "Trigger",
    "TriggerBook",
    "approval_key",
    "approval_policy",
    "awaiting",
    "catalog_for",
    "decide",
    "idempotency_key",
    "is_side_effecting",
    "manager_for",
    "publish_manager",
    "run_id_for",
    "trace_for",
    "triggers_for",
]
