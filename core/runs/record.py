"""One agent run as plain data: what a checkpoint stores and what ``GET /agents/runs/{id}`` shows.

A :class:`RunRecord` is the whole state of a run: which agent, the input and budget it started
with, its status, the transcript so far, the tool call in flight (``pending``), usage and cost,
the events a client can replay, and the outcome. ``to_state()`` is the checkpoint's JSON document
and ``from_checkpoint()`` reads one back, so a run can continue in another process from nothing but
its latest checkpoint.

Events are stored with their ids (``<epoch>-<n>``, see :mod:`core.runs.feed`) so a client
that reconnects after a restart resumes from the same numbering. Tool results are stored as JSON
(``json_safe``: anything JSON cannot hold is rendered with ``str``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from core.contracts.ports import Checkpoint, CheckpointStatus
from core.contracts.types import Message, ToolCall, Usage
from core.serialization import thaw

TERMINAL = frozenset({CheckpointStatus.COMPLETED, CheckpointStatus.FAILED, CheckpointStatus.CANCELLED})


@dataclass
class RunRecord:
    """Everything about one run; mutable while the run executes, saved as a checkpoint at each step."""

    run_id: str
    agent: str
    input: str
    max_cost_usd: str | None = None
    max_calls: int | None = None
    owner: str | None = None
    tenant: str | None = None
    status: CheckpointStatus = CheckpointStatus.RUNNING
    transcript: list[Message] = field(default_factory=list)
    pending: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: str = "0.000000"
    model_calls: int = 0
    estimated_calls: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    epoch: int = 0
    output: str | None = None
    reason: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    version: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_state(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "input": self.input,
            "budget": {"max_cost_usd": self.max_cost_usd, "max_calls": self.max_calls},
            "owner": self.owner,
            "tenant": self.tenant,
            "transcript": [message_json(m) for m in self.transcript],
            "pending": self.pending,
            "usage": usage_json(self.usage),
            "cost_usd": self.cost_usd,
            "model_calls": self.model_calls,
            "estimated_calls": self.estimated_calls,
            "events": self.events,
            "epoch": self.epoch,
            "output": self.output,
            "reason": self.reason,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint) -> RunRecord:
        state = thaw(checkpoint.state)
        budget = state.get("budget") or {}
        return cls(
            run_id=checkpoint.run_id,
            agent=state["agent"],
            input=state["input"],
            max_cost_usd=budget.get("max_cost_usd"),
            max_calls=budget.get("max_calls"),
            owner=state.get("owner"),
            tenant=state.get("tenant"),
            status=checkpoint.status,
            transcript=[message_from(m) for m in state.get("transcript", [])],
            pending=state.get("pending"),
            usage=usage_from(state.get("usage") or {}),
            cost_usd=state.get("cost_usd", "0.000000"),
            model_calls=state.get("model_calls", 0),
            estimated_calls=state.get("estimated_calls", 0),
            events=list(state.get("events", [])),
            epoch=state.get("epoch", 0),
            output=state.get("output"),
            reason=state.get("reason"),
            error=state.get("error"),
            created_at=state.get("created_at", checkpoint.created_at),
            updated_at=state.get("updated_at", checkpoint.created_at),
            version=checkpoint.version,
        )

    def view(self, versions: list[int]) -> dict[str, Any]:
        """The run as ``GET /agents/runs/{id}`` shows it."""
        return {
            "id": self.run_id,
            "agent": self.agent,
            "input": self.input,
            "owner": self.owner,
            "tenant": self.tenant,
            "status": str(self.status),
            "reason": self.reason,
            "error": self.error,
            "output": self.output,
            "usage": usage_json(self.usage),
            "cost_usd": self.cost_usd,
            "model_calls": self.model_calls,
            "awaiting_approval": (self.pending or {}).get("awaiting_approval"),
            "usage_estimated": self.estimated_calls > 0,
            "estimated_calls": self.estimated_calls,
            "budget": {"max_cost_usd": self.max_cost_usd, "max_calls": self.max_calls},
            "version": self.version,
            "versions": versions,
            "events": len(self.events),
            "resumed": self.epoch,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def message_json(message: Message) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": str(message.role), "content": message.content}
    if message.name is not None:
        entry["name"] = message.name
    if message.tool_call_id is not None:
        entry["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        entry["tool_calls"] = [tool_call_json(call) for call in message.tool_calls]
    return entry


def message_from(entry: Mapping[str, Any]) -> Message:
    return Message(
        role=entry["role"],
        content=entry.get("content", ""),
        name=entry.get("name"),
        tool_call_id=entry.get("tool_call_id"),
        tool_calls=tuple(tool_call_from(c) for c in entry.get("tool_calls", ())),
    )


def tool_call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": thaw(call.arguments)}


def tool_call_from(entry: Mapping[str, Any]) -> ToolCall:
    return ToolCall(entry["id"], entry["name"], entry.get("arguments") or {})


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd": usage.cost_usd,
    }


def usage_from(entry: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(entry.get("input_tokens", 0)),
        output_tokens=int(entry.get("output_tokens", 0)),
        cache_read_tokens=int(entry.get("cache_read_tokens", 0)),
        cache_write_tokens=int(entry.get("cache_write_tokens", 0)),
        cost_usd=float(entry.get("cost_usd", 0.0)),
    )


def json_safe(value: Any) -> Any:
    """``value`` as JSON can hold it: containers thawed, anything else rendered with ``str``."""
    return json.loads(json.dumps(thaw(value), default=str))


def money(value: Decimal) -> str:
    return str(value)
