"""Human approval of tool calls: a run suspends until its owner or an admin approves or denies.

A tool asks for approval by declaration: ``requires_approval = True`` on the tool object, or a
policy on the arguments, ``requires_approval(arguments) -> bool | str`` (a string is the question
shown). When the model calls such a tool, the run, before the tool starts:

1. records the question in the checkpoint's ``pending`` call (``awaiting_approval``, with when it
   was asked and when it expires), publishes an ``interrupt`` event saying what is asked, and
   saves the checkpoint with status ``suspended``;
2. waits for a decision in the ``store`` (``agents:approval:<call key>``), looking every ``poll``
   seconds; ``POST /agents/runs/{id}/approval`` writes it from any process. While it waits the
   run stays leased to its process; if that process dies, the process that takes the run over
   finds the call still awaiting approval (it never started) and waits on, with the same expiry;
3. with the decision (or, after ``timeout`` seconds, the ``on_timeout`` one: deny unless
   ``AGENTS_APPROVAL_ON_TIMEOUT=approve``) it publishes an ``approval`` event, saves the run
   ``running`` again, and runs the tool — with the edited arguments if the approver gave some —
   or answers the model that the call was denied. The tool result is recorded as usual, so a
   call that was decided is never asked about, or run, twice.

Cancelling a suspended run stops it at once. Settings: ``AGENTS_APPROVAL_TIMEOUT_SECONDS``
(86400), ``AGENTS_APPROVAL_ON_TIMEOUT`` (``deny``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from core.contracts.middleware import Call, Handler, Middleware
from core.contracts.ports import CheckpointStatus, StorePort
from core.contracts.types import ToolRequest
from core.serialization import thaw

from .record import json_safe
from .tool_records import current_call_key

if TYPE_CHECKING:
    from .execution import RunExecution

INTERRUPT = "interrupt"
APPROVAL = "approval"
AWAITING = "awaiting_approval"


def approval_key(call_key: str) -> str:
    return f"agents:approval:{call_key}"


def question_for(tool: Any, arguments: Mapping[str, Any]) -> str | None:
    """What to ask before running ``tool`` with ``arguments``, or None when it needs no approval."""
    rule = getattr(tool, "requires_approval", False)
    if callable(rule):
        rule = rule(thaw(arguments))
    if not rule:
        return None
    name = getattr(tool, "name", "this tool")
    return rule if isinstance(rule, str) else f"may the agent call {name}?"


def awaiting(pending: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The approval a pending call waits for, if it does."""
    if not pending:
        return None
    asked = pending.get(AWAITING)
    return asked if isinstance(asked, Mapping) else None


async def decide(
    store: StorePort,
    call_key: str,
    *,
    approve: bool,
    by: str | None,
    arguments: Any,
    reason: str | None,
    ttl: float | None,
) -> dict[str, Any]:
    decision = {
        "approved": approve,
        "by": by,
        "arguments": json_safe(arguments) if arguments is not None else None,
        "reason": reason,
        "at": time.time(),
    }
    await store.set(approval_key(call_key), decision, ttl=ttl)
    return decision


def approval_policy(
    execution: RunExecution,
    store: StorePort | None,
    *,
    timeout: float,
    on_timeout_approve: bool = False,
    poll: float = 1.0,
) -> Middleware:
    """The tool middleware that suspends ``execution`` on a call that needs approval."""

    async def approval_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        request = call.request
        key = current_call_key.get()
        question = question_for(request.tool, request.arguments) if isinstance(request, ToolRequest) else None
        if question is None or key is None or not isinstance(request, ToolRequest):
            async for item in nxt(call):
                yield item
            return
        if store is None:
            yield "error: this tool needs a human's approval, and approvals need the store tool"
            return
        decision = await _decision(
            execution, store, key, question, request, timeout, on_timeout_approve, poll
        )
        if not decision.get("approved"):
            reason = decision.get("reason") or (
                "no answer in time" if decision.get("by") == "timeout" else ""
            )
            yield f"denied: a human did not approve this call{f' ({reason})' if reason else ''}"
            return
        edited = decision.get("arguments")
        if isinstance(edited, dict) and isinstance(request, ToolRequest):
            call = dataclasses.replace(call, request=dataclasses.replace(request, arguments=edited))
        async for item in nxt(call):
            yield item

    return approval_middleware


async def _decision(
    execution: RunExecution,
    store: StorePort,
    key: str,
    question: str,
    request: ToolRequest,
    expiry: float,
    on_timeout_approve: bool,
    poll: float,
) -> dict[str, Any]:
    record = execution.record
    pending = record.pending if record.pending is not None else {}
    record.pending = pending
    decision = await store.get(approval_key(key))
    if not isinstance(decision, dict):
        asked = awaiting(pending)
        if asked is None:
            now = time.time()
            asked = {"question": question, "asked_at": now, "expires_at": now + expiry}
            pending[AWAITING] = asked
            execution.feed.publish(
                INTERRUPT,
                {
                    "kind": "approval",
                    "question": question,
                    "tool_call": pending.get("call")
                    or {"name": request.name, "arguments": thaw(request.arguments)},
                    "expires_at": asked["expires_at"],
                    "approve": f"/agents/runs/{record.run_id}/approval",
                },
            )
        await execution.save(CheckpointStatus.SUSPENDED)
        decision = await _wait(execution, store, key, float(asked["expires_at"]), on_timeout_approve, poll)
    pending.pop(AWAITING, None)
    pending["approval"] = decision
    execution.feed.publish(APPROVAL, dict(decision))
    await execution.save(CheckpointStatus.RUNNING)
    return decision


async def _wait(
    execution: RunExecution,
    store: StorePort,
    key: str,
    expires_at: float,
    on_timeout_approve: bool,
    poll: float,
) -> dict[str, Any]:
    while True:
        execution.ctx.check_cancelled()
        decision = await store.get(approval_key(key))
        if isinstance(decision, dict):
            return decision
        left = expires_at - time.time()
        if left <= 0:
            return {
                "approved": on_timeout_approve,
                "by": "timeout",
                "arguments": None,
                "reason": None,
                "at": time.time(),
            }
        try:  # wake at once when the run is cancelled
            async with asyncio.timeout(min(poll, left)):
                await execution.token.wait()
        except TimeoutError:
            pass
