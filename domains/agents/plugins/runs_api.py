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
``POST /agents/runs/{run_id}/approval``     ``{"approve": bool, "arguments"?, "reason"?}`` -> 202: decide
                                            the tool call a ``suspended`` run waits on; 409 when
                                            it waits on none
``GET  /agents/approvals``                  the runs waiting for a human's approval (the caller's;
                                            an admin's: all), with what each asks
``GET  /agents/usage``                      spend so far against the caps (``AGENTS_SPEND_LIMITS``):
                                            the caller's user and tenant; an admin may ask for
                                            ``?user=``/``?tenant=`` and sees every agent's
==========================================  =========================================================

**Who may call.** With ``AUTH_SECRET_KEY`` set, every endpoint needs a bearer token, except for
agents declared ``public``. A run belongs to the token's subject (and its ``tenant`` claim); users
list, read, follow and cancel their own runs, admins every run, and anyone else is answered 404
(:mod:`domains.agents.runs.access`). The OpenAPI document names the bearer scheme per operation.

**Spend limits** (:mod:`domains.agents.runs.quota`): caps per user, tenant and agent, per day and
month, in dollars and tokens, checked before each model call and charged after it through the
``store`` tool; a start over a cap is a 429 of kind ``quota_exceeded`` with ``Retry-After``, and a
running run stops at its next model call. A call the model server reports no usage for is charged
as an estimate, and the run says ``usage_estimated``.

**Human approval** (:mod:`core.runs.approval`): a tool declared ``requires_approval``
suspends its run (an ``interrupt`` event, checkpoint ``suspended``) until the owner or an admin
decides through ``/approval`` on any process, or ``AGENTS_APPROVAL_TIMEOUT_SECONDS`` pass.

A database or checkpoint store that cannot be reached answers 503. Agents are declared by other
plugins of this domain (``core.runs.catalog``). Runs are
executed, checkpointed and resumed by :mod:`core.runs.manager`; a process that boots
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

import math
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from core import (
    BasePlugin,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
    ToolUnavailableError,
    TooManyRequestsError,
)
from core.contracts.middleware import Middleware
from core.contracts.ports import CheckpointStatus
from core.errors import ErrorKind
from core.runs import (
    DEFAULT_LEASE_SECONDS,
    AgentSpec,
    RunExecution,
    RunIndex,
    RunManager,
    RunRecord,
    RunServices,
    RunSettings,
    approval_key,
    approval_policy,
    awaiting,
    catalog_for,
    decide,
    publish_manager,
    trace_for,
)
from core.settings import env_choice, env_float
from domains.agents.models.runs import ApprovalRequest, StartRunRequest
from domains.agents.runs.access import Caller, auth_required, check_run, token_required
from domains.agents.runs.quota import Payer, QuotaExceeded, SpendLedger, load_caps, spend_policy

TAGS = ["agents"]
MAX_LIST = 200


class QuotaExceededError(TooManyRequestsError):
    """429: a spend cap is reached; ``Retry-After`` says when it resets."""

    kind = ErrorKind.QUOTA_EXCEEDED


class AgentRunsPlugin(BasePlugin):
    def __init__(
        self,
        http: Any,
        checkpoint: Any,
        db: Any,
        container: Any,
        store: Any = None,
        telemetry: Any = None,
        registry: Any = None,
    ) -> None:
        self.http = http
        self.registry = registry
        self.store = store
        self.approval_timeout = env_float("AGENTS_APPROVAL_TIMEOUT_SECONDS", 86_400.0)
        on_timeout = env_choice("AGENTS_APPROVAL_ON_TIMEOUT", "deny", ("deny", "approve"))
        self.approve_on_timeout = on_timeout == "approve"
        self.record_ttl = env_float("AGENTS_TOOL_RECORD_TTL_SECONDS", 7 * 24 * 3600.0) or None
        self.catalog = catalog_for(container)
        self.ledger = SpendLedger(store, load_caps())
        if self.ledger.caps and store is None:
            raise ValueError("AGENTS_SPEND_LIMITS needs the store tool to count spend in")
        self.manager = RunManager(
            catalog=self.catalog,
            index=RunIndex(db, lease_seconds=_lease_seconds()),
            services=RunServices(
                checkpoint=checkpoint,
                store=store,
                trace=trace_for(telemetry),
                model_retries=max(1, int(env_float("AGENTS_MODEL_RETRIES", 3))),
                tool_record_ttl=env_float("AGENTS_TOOL_RECORD_TTL_SECONDS", 7 * 24 * 3600.0) or None,
                chat_policies=self._policies,
                tool_policies=self._tool_policies,
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
        publish_manager(container, self.manager)  # for triggered runs (core.runs.triggers)

    async def on_boot(self) -> None:
        http = self.http
        self.protected = auth_required()
        # "optional": a token that is sent is verified; the handlers decide what anonymous callers
        # may do (public agents only). Listing runs always needs one.
        some: Any = "optional" if self.protected else False
        every: Any = self.protected
        http.add_endpoint("/agents", "GET", self.agents, tags=TAGS, auth=some)
        http.add_endpoint(
            "/agents/{name}/runs",
            "POST",
            self.start,
            request_model=StartRunRequest,
            tags=TAGS,
            status_code=202,
            auth=some,
        )
        http.add_endpoint("/agents/runs", "GET", self.runs, tags=TAGS, auth=every)
        http.add_endpoint("/agents/runs/{run_id}", "GET", self.run, tags=TAGS, auth=some)
        http.add_sse_endpoint("/agents/runs/{run_id}/events", self.events, tags=TAGS, auth=some)
        http.add_endpoint(
            "/agents/runs/{run_id}/cancel", "POST", self.cancel, tags=TAGS, status_code=202, auth=some
        )
        http.add_endpoint(
            "/agents/runs/{run_id}/approval",
            "POST",
            self.approval,
            request_model=ApprovalRequest,
            tags=TAGS,
            status_code=202,
            auth=some,
        )
        http.add_endpoint("/agents/approvals", "GET", self.approvals, tags=TAGS, auth=every)
        http.add_endpoint("/agents/usage", "GET", self.usage, tags=TAGS, auth=every)
        if self.registry is not None:
            self.registry.set_domain_metadata("agents", "spend_limits", self.ledger.describe())
        self.manager.start_resuming()

    def _tool_policies(self, execution: RunExecution) -> list[Middleware]:
        policy = approval_policy(
            execution,
            self.store,
            timeout=self.approval_timeout,
            on_timeout_approve=self.approve_on_timeout,
            poll=self.manager.settings.poll,
        )
        return [policy]

    def _policies(self, record: RunRecord, spec: AgentSpec) -> list[Middleware]:
        def estimated() -> None:
            record.estimated_calls += 1

        payer = Payer(record.owner, record.tenant, record.agent)
        price = getattr(spec.llm, "cost", None)
        return [spend_policy(self.ledger, payer, price=price, on_estimate=estimated)]

    def caller(self, context: dict[str, Any]) -> Caller:
        return Caller.of(context.get("identity"), protected=self.protected)

    async def _checked(self, run_id: str, context: dict[str, Any]) -> None:
        """Raise unless the caller may use run ``run_id`` (401 anonymous, 404 someone else's)."""
        caller = self.caller(context)
        if caller.admin:
            return
        try:
            record = await self.manager.record_of(run_id)
        except NotFoundError:
            if caller.anonymous:
                raise token_required("use this run") from None
            raise
        check_run(caller, run_id, record.owner)

    async def on_shutdown(self) -> None:
        await self.manager.close()

    async def agents(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The agents this service offers (to an anonymous caller: the public ones)."""
        anonymous = self.caller(context).anonymous
        return {"agents": [s.view() for s in self.catalog.specs() if s.public or not anonymous]}

    async def start(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Start a run of agent ``name``; answers once its first checkpoint is saved."""
        request: StartRunRequest = context["model"]
        budget = request.budget
        caller = self.caller(context)
        spec = self.catalog.get(data["name"])
        if caller.anonymous and (spec is None or not spec.public):
            raise token_required("run this agent")
        with _answerable():
            try:
                await self.ledger.check(Payer(caller.subject, caller.tenant, data["name"]))
            except QuotaExceeded as exc:
                wait = max(1, math.ceil(exc.resets_at - time.time()))
                raise QuotaExceededError(exc.reason, retry_after=wait) from None
            record = await self.manager.start(
                data["name"],
                request.input,
                max_cost_usd=str(budget.max_cost_usd) if budget and budget.max_cost_usd is not None else None,
                max_calls=budget.max_calls if budget else None,
                owner=caller.subject,
                tenant=caller.tenant,
            )
        base = f"/agents/runs/{record.run_id}"
        return {
            "id": record.run_id,
            "agent": record.agent,
            "status": str(record.status),
            "links": {"run": base, "events": f"{base}/events", "cancel": f"{base}/cancel"},
        }

    async def runs(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Recent runs, newest first, from the run index: the caller's own (an admin's: all)."""
        raw = data.get("limit", "50")
        if not isinstance(raw, str) or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST:
            raise InvalidInputError(f"limit must be a whole number between 1 and {MAX_LIST}, got {raw!r}")
        agent = data.get("agent")
        if agent is not None and not isinstance(agent, str):
            raise InvalidInputError("agent must be given once")
        with _answerable():
            caller = self.caller(context)
            runs = await self.manager.index.recent(
                int(raw), agent, subject=caller.subject, everyone=caller.admin
            )
            return {"runs": runs}

    async def run(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """A run: status, output, usage, cost and its checkpoint versions."""
        with _answerable():
            await self._checked(data["run_id"], context)
            return await self.manager.view(data["run_id"])

    async def events(self, data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The run's events as server-sent events, from ``Last-Event-ID`` on, until its final one."""
        with _answerable():
            await self._checked(data["run_id"], context)
            return await self.manager.follow(data["run_id"], context.get("last_event_id"))

    async def cancel(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Ask the run to stop; 409 if it has already ended."""
        with _answerable():
            await self._checked(data["run_id"], context)
            return await self.manager.cancel(data["run_id"])

    async def approval(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Approve or deny the tool call a suspended run waits on (the owner or an admin)."""
        request: ApprovalRequest = context["model"]
        run_id = data["run_id"]
        with _answerable():
            await self._checked(run_id, context)
            record = await self.manager.record_of(run_id)
            if record.status != CheckpointStatus.SUSPENDED or awaiting(record.pending) is None:
                raise ConflictError(f"agent run {run_id} is not waiting for an approval ({record.status})")
            if self.store is None:
                raise ServiceUnavailableError("approvals need the store tool")
            key = str((record.pending or {})["key"])
            if isinstance(await self.store.get(approval_key(key)), dict):
                raise ConflictError(f"agent run {run_id}: this call has already been decided")
            decision = await decide(
                self.store,
                key,
                approve=request.approve,
                by=self.caller(context).subject,
                arguments=request.arguments,
                reason=request.reason,
                ttl=self.record_ttl,
            )
        return {"id": run_id, "status": "approved" if request.approve else "denied", "decision": decision}

    async def approvals(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The runs waiting for a human's approval, among the newest runs in flight."""
        caller = self.caller(context)
        waiting: list[dict[str, Any]] = []
        with _answerable():
            rows = await self.manager.index.recent(MAX_LIST, subject=caller.subject, everyone=caller.admin)
            for row in rows:
                if row["status"] != "running":
                    continue
                try:
                    record = await self.manager.record_of(str(row["id"]))
                except NotFoundError:
                    continue
                asked = awaiting(record.pending)
                if record.status != CheckpointStatus.SUSPENDED or asked is None:
                    continue
                waiting.append(
                    {
                        "id": record.run_id,
                        "agent": record.agent,
                        "owner": record.owner,
                        "question": asked.get("question"),
                        "tool_call": (record.pending or {}).get("call"),
                        "asked_at": asked.get("asked_at"),
                        "expires_at": asked.get("expires_at"),
                    }
                )
        return {"runs": waiting}

    async def usage(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Spend so far against the spend caps: the caller's (an admin's: any user, tenant, agent)."""
        caller = self.caller(context)
        user, tenant = data.get("user"), data.get("tenant")
        if (user is not None or tenant is not None) and not caller.admin:
            raise ForbiddenError("only an admin may read another user's or tenant's spend")
        wanted = [("user", user if isinstance(user, str) else caller.subject or "anonymous")]
        tenant = tenant if isinstance(tenant, str) else caller.tenant
        if tenant:
            wanted.append(("tenant", tenant))
        if caller.admin:
            wanted += [("agent", spec.agent.name) for spec in self.catalog.specs()]
        rows: list[dict[str, Any]] = []
        with _answerable():
            for scope, name in wanted:
                rows += await self.ledger.usage(scope, name)
        return {"caps": self.ledger.describe(), "usage": rows}


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
