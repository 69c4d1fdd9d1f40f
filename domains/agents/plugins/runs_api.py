"""The agent runs API: start a declared agent, read a run, follow its events live, cancel it.

==========================================  =========================================================
``GET  /agents``                            the declared agents (name, model, tools)
``POST /agents/{name}/runs``                ``{"input": ..., "budget": {...}}`` -> 202 ``{"id", ...}``
``GET  /agents/runs``                       recent runs (``?agent=``, ``?limit=``, newest first)
``GET  /agents/runs/{run_id}``              status, output, usage, cost, checkpoint versions
``GET  /agents/runs/{run_id}/events``       server-sent events: ``message_delta``, ``tool_call``,
                                            ``tool_result``, ``resumed``, ``final``; resumable with
                                            ``Last-Event-ID``; the stream ends after ``final``
``POST /agents/runs/{run_id}/cancel``       202 ``{"status": "cancelling" | "cancelled"}``; 409 when
                                            the run has already ended
==========================================  =========================================================

A database or checkpoint store that cannot be reached answers 503. Agents are declared by other
plugins of this domain (``domains.agents.runs.catalog``). Runs are
executed, checkpointed and resumed by :mod:`domains.agents.runs.manager`; a process that boots
continues the runs the previous one left in flight. ``cost_usd`` is a decimal string (the budget's
exact ledger); ``usage.cost_usd`` is the float sum of the model's reported costs.

Settings: ``AGENTS_RESUME_WAIT_SECONDS`` (30: how long a resumed run waits for its agent to be
declared), ``AGENTS_CANCEL_GRACE_SECONDS`` (5: how long a cancelled run may take to reach a safe
point before its task is cancelled), ``AGENTS_EVENTS_POLL_SECONDS`` (1: how often a stream of a run
running in another process re-reads its checkpoint), ``AGENTS_MODEL_RETRIES`` (3 attempts for a
model call that fails transiently before its first token), ``AGENTS_TOOL_RECORD_TTL_SECONDS``
(one week: how long a tool result is kept for a resumed run), ``AGENTS_TOOL_GRACE_SECONDS`` (5: at
shutdown, how long a tool call in flight may take to finish), ``AGENTS_RUN_RETENTION_SECONDS``
(30 days: how long a finished run is kept; 0 keeps every run), ``AGENT_RUN_LEASE_SECONDS`` (15: how
long a process's claim on a run it executes lasts without renewal; when several processes share
the database, a run whose process was killed is taken over by another within about that long).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from core import BasePlugin, InvalidInputError, ServiceUnavailableError, ToolUnavailableError
from core.settings import env_float
from domains.agents.models.runs import StartRunRequest
from domains.agents.runs.catalog import catalog_for
from domains.agents.runs.execution import RunServices
from domains.agents.runs.index import DEFAULT_LEASE_SECONDS, RunIndex
from domains.agents.runs.manager import RunManager, RunSettings
from domains.agents.runs.tracing import trace_for

TAGS = ["agents"]
MAX_LIST = 200


class AgentRunsPlugin(BasePlugin):
    def __init__(
        self, http: Any, checkpoint: Any, db: Any, container: Any, store: Any = None, telemetry: Any = None
    ) -> None:
        self.http = http
        self.catalog = catalog_for(container)
        self.manager = RunManager(
            catalog=self.catalog,
            index=RunIndex(db, lease_seconds=_lease_seconds()),
            services=RunServices(
                checkpoint=checkpoint,
                store=store,
                trace=trace_for(telemetry),
                model_retries=max(1, int(env_float("AGENTS_MODEL_RETRIES", 3))),
                tool_record_ttl=env_float("AGENTS_TOOL_RECORD_TTL_SECONDS", 7 * 24 * 3600.0) or None,
            ),
            settings=RunSettings(
                resume_wait=env_float("AGENTS_RESUME_WAIT_SECONDS", 30.0),
                cancel_grace=env_float("AGENTS_CANCEL_GRACE_SECONDS", 5.0),
                poll=env_float("AGENTS_EVENTS_POLL_SECONDS", 1.0) or 1.0,
                lease=_lease_seconds(),
                tool_grace=env_float("AGENTS_TOOL_GRACE_SECONDS", 5.0),
                retention=env_float("AGENTS_RUN_RETENTION_SECONDS", 30 * 24 * 3600.0),
            ),
        )

    async def on_boot(self) -> None:
        http = self.http
        http.add_endpoint("/agents", "GET", self.agents, tags=TAGS)
        http.add_endpoint(
            "/agents/{name}/runs",
            "POST",
            self.start,
            request_model=StartRunRequest,
            tags=TAGS,
            status_code=202,
        )
        http.add_endpoint("/agents/runs", "GET", self.runs, tags=TAGS)
        http.add_endpoint("/agents/runs/{run_id}", "GET", self.run, tags=TAGS)
        http.add_sse_endpoint("/agents/runs/{run_id}/events", self.events, tags=TAGS)
        http.add_endpoint("/agents/runs/{run_id}/cancel", "POST", self.cancel, tags=TAGS, status_code=202)
        self.manager.start_resuming()

    async def on_shutdown(self) -> None:
        await self.manager.close()

    async def agents(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The agents this service offers."""
        return {"agents": [spec.view() for spec in self.catalog.specs()]}

    async def start(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Start a run of agent ``name``; answers once its first checkpoint is saved."""
        request: StartRunRequest = context["model"]
        budget = request.budget
        with _answerable():
            record = await self.manager.start(
                data["name"],
                request.input,
                max_cost_usd=str(budget.max_cost_usd) if budget and budget.max_cost_usd is not None else None,
                max_calls=budget.max_calls if budget else None,
            )
        base = f"/agents/runs/{record.run_id}"
        return {
            "id": record.run_id,
            "agent": record.agent,
            "status": str(record.status),
            "links": {"run": base, "events": f"{base}/events", "cancel": f"{base}/cancel"},
        }

    async def runs(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Recent runs, newest first, from the run index."""
        raw = data.get("limit", "50")
        if not isinstance(raw, str) or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST:
            raise InvalidInputError(f"limit must be a whole number between 1 and {MAX_LIST}, got {raw!r}")
        agent = data.get("agent")
        if agent is not None and not isinstance(agent, str):
            raise InvalidInputError("agent must be given once")
        with _answerable():
            return {"runs": await self.manager.index.recent(int(raw), agent)}

    async def run(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """A run: status, output, usage, cost and its checkpoint versions."""
        with _answerable():
            return await self.manager.view(data["run_id"])

    async def events(self, data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The run's events as server-sent events, from ``Last-Event-ID`` on, until its final one."""
        with _answerable():
            return await self.manager.follow(data["run_id"], context.get("last_event_id"))

    async def cancel(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Ask the run to stop; 409 if it has already ended."""
        with _answerable():
            return await self.manager.cancel(data["run_id"])


def _lease_seconds() -> float:
    lease = env_float("AGENT_RUN_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)
    if lease <= 0:
        raise ValueError(f"AGENT_RUN_LEASE_SECONDS must be above 0, got {lease:g}")
    return lease


@contextmanager
def _answerable() -> Iterator[None]:
    """A database or checkpoint store that is down is a 503 saying so, not a 500."""
    try:
        yield
    except ToolUnavailableError as exc:
        raise ServiceUnavailableError(f"agent runs are unavailable right now: {exc}") from exc
