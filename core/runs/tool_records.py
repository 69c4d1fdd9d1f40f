"""The "after" half of a durable tool call: its result recorded under an idempotency key.

Before an agent's tool runs, the run saves a checkpoint naming the call it is about to make
(``pending``, with its key); that is the "before" half, and since a checkpoint save is refused to a
producer that is not the run's latest, only one process can ever get past it. When the tool
returns, :func:`record_tool_results` (a tool middleware) writes the result to the ``store`` under the
key at once, before the run goes on to checkpoint the result message. A process that dies in
between leaves the result in the store, and the resumed run uses it instead of calling the tool
again. A process that dies *during* the call leaves no result: the resumed run then repeats the call
only if the tool is not side-effecting (see :mod:`core.runs.open_turn`).

The key is ``agents:tool:<run id>:<turn>:<call id>``, where ``<turn>`` is the position of the
assistant message that asked for the call (call ids are only unique within one answer for some
servers). Which call is running is known from :data:`current_call_key`, set by the run around
each tool execution. Records expire after ``AGENTS_TOOL_RECORD_TTL`` seconds (default one week).
A store that is unreachable when the result is recorded is logged, not raised: the checkpoint
that follows records the result too, and failing the run would lose it.

**Fencing.** A process paused past its lease (SIGSTOP, a long GC, a frozen VM) may wake up inside a
tool call of a run another process has meanwhile taken over. Two things keep it from committing:

- before recording a result, the middleware runs the run's *fence* (``RunExecution.fence``): it
  raises :class:`~core.state.stores.CheckpointVersionConflict` when a newer checkpoint than this
  process's last one exists (the takeover moved the run's version and its epoch on), so the stale
  process records nothing, and its next checkpoint save is refused the same way;
- the record is written with ``get_or_set``: the first result recorded under a key stays, a later
  writer cannot replace it.

What neither can undo is the tool's own effect in the outside world; for that a tool gets a
stable **idempotency key**: :func:`idempotency_key` returns, inside a tool call of a run, the
call's key (the same in every process and on every retry of that call), to pass on to the
service it calls (an ``Idempotency-Key`` header, a unique request id, a conditional write).

**Tools are side-effecting unless they say otherwise**
(:func:`~core.agents.tool_calls.is_side_effecting`): a call that was in flight when its process
stopped is run again on resume only if its tool declares ``side_effecting = False``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from core.agents.tool_calls import is_side_effecting as is_side_effecting  # re-exported
from core.agents.tool_calls import render_tool_result
from core.contracts.errors import StoreUnavailable
from core.contracts.middleware import Call, Handler, Middleware, collect_one
from core.contracts.ports import StorePort
from core.contracts.types import ToolRequest

from .record import json_safe

log = logging.getLogger("keel.agents")

current_call_key: ContextVar[str | None] = ContextVar("keel_agents_current_call_key", default=None)


def call_key(run_id: str, turn: int, call_id: str) -> str:
    return f"agents:tool:{run_id}:{turn}:{call_id}"


def idempotency_key() -> str | None:
    """Inside a tool call of an agent run: the call's stable key ``agents:tool:<run>:<turn>:<call>``
    (the same in whichever process runs or re-runs the call); ``None`` outside one."""
    return current_call_key.get()


Fence = Callable[[], Awaitable[None]]
"""Raises ``CheckpointVersionConflict`` when this process no longer owns the run."""


def record_tool_results(
    store: StorePort | None, *, ttl: float | None, fence: Fence | None = None
) -> Middleware:
    """Store each tool result under the running call's key (a pass-through without a store or key),
    after checking ``fence``; the first result stored under a key is kept."""

    async def record_middleware(call: Call, nxt: Handler) -> AsyncIterator[Any]:
        key = current_call_key.get()
        if store is None or key is None or not isinstance(call.request, ToolRequest):
            async for item in nxt(call):
                yield item
            return
        result = await collect_one(nxt(call))
        if fence is not None:
            await fence()  # a process that lost the run records nothing
        value = {"result": json_safe(result), "text": render_tool_result(result)}

        async def first_result() -> dict[str, Any]:
            return value

        try:
            await store.get_or_set(key, first_result, ttl=ttl)
        except StoreUnavailable:
            log.warning(
                "agents: the store is unavailable; tool result %s is kept by the checkpoint only", key
            )
        yield result

    return record_middleware


async def recorded_result(store: StorePort | None, key: str) -> dict[str, Any] | None:
    """The result recorded under ``key``, if any (an unreachable store counts as none)."""
    if store is None:
        return None
    try:
        found = await store.get(key)
    except StoreUnavailable:
        log.warning("agents: the store is unavailable; cannot tell whether %s completed", key)
        return None
    return found if isinstance(found, dict) and "text" in found else None
