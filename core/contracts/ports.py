"""Ports: the shapes of the external systems the agent kernel needs but does not build.

A port is a ``typing.Protocol``, so an adapter satisfies it by having the right methods, without
inheriting from Keel. All of them are ``@runtime_checkable`` so ``isinstance(x, LLMPort)`` works
as a wiring check (it checks that the methods exist, not their signatures). The value types a
port speaks in (``Checkpoint``, ``SearchHit``, ``FetchResponse``, ``Chunk``, ``VectorHit``,
``Observation``) live here beside it, frozen like every kernel value.

Choices made here (the value types' are tested beside them; the behaviour a ``StorePort`` or
``CheckpointPort`` promises is for every backend's parity suite to test):

* ``LLMPort`` takes the request's fields as keyword arguments, so
  ``await llm.chat(messages=[...], model="m")`` is a complete call. ``stream()`` is the
  primitive; ``chat()`` must equal collecting ``stream()`` with ``assemble_deltas``.
* Tenancy: ``StorePort`` and ``VectorPort`` methods take a keyword ``scope``; ``None`` means the
  zero tenant ``Scope()``. A backend keeps each scope's keys apart (typically by prefixing
  ``scope.key()``), so the same key in two scopes names two values.
* ``StorePort`` values are JSON documents; ``ttl`` is in seconds. ``increment`` works on integer
  counters only and raises ``StoreValueError`` (never a driver error) when ``by`` is not a whole
  number or the key already holds something that is not an integer.
* ``CheckpointStatus`` has ``RUNNING`` and ``SUSPENDED`` (waiting on a human or an external
  event; resumable) as live states and ``COMPLETED``, ``FAILED``, ``CANCELLED`` as terminal ones.
* Hashes: ``Checkpoint`` on ``(run_id, version)``, ``SearchHit`` on ``(url, title)``,
  ``FetchResponse`` on ``(url, status, content_type, fetched_at)``, ``Chunk`` on ``(id, text)``,
  ``Observation`` on ``(id, kind, agent)``; equality compares every field.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from core.contracts.types import Delta, LLMResult, Message, Scope, ToolSchema, assemble_deltas
from core.serialization import FrozenDict, freeze_mapping

if TYPE_CHECKING:
    from core.contracts.protocols import Ctx

__all__ = [
    "ChatFromStream",
    "CheckpointPort",
    "Checkpoint",
    "CheckpointStatus",
    "Chunk",
    "ClockPort",
    "FetchPort",
    "FetchResponse",
    "LLMPort",
    "MetricsPort",
    "Observation",
    "ObserverPort",
    "SearchHit",
    "SearchPort",
    "Span",
    "StorePort",
    "ToolPort",
    "TracePort",
    "VectorHit",
    "VectorPort",
]

_set = object.__setattr__


def _empty_mapping() -> Mapping[str, Any]:
    return FrozenDict()


# ---- value types ---------------------------------------------------------------------------


class CheckpointStatus(StrEnum):
    """Where a run stood when it was snapshotted."""

    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True when no further work is expected, so the run must not be resumed."""
        return self in _TERMINAL_STATUSES


_TERMINAL_STATUSES = frozenset(
    {CheckpointStatus.COMPLETED, CheckpointStatus.FAILED, CheckpointStatus.CANCELLED}
)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A durable snapshot of one run's state; ``version`` counts up from 1 per ``run_id``.

    ``created_at`` is a unix timestamp from the producer's clock. ``status`` given as a plain
    string is converted to ``CheckpointStatus`` (an unknown one raises ``ValueError``).
    """

    run_id: str
    version: int
    state: Mapping[str, Any]
    created_at: float
    status: CheckpointStatus

    def __post_init__(self) -> None:
        _set(self, "state", freeze_mapping(self.state))
        if type(self.status) is not CheckpointStatus:
            _set(self, "status", CheckpointStatus(self.status))

    def __hash__(self) -> int:
        return hash((self.run_id, self.version))


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One web-search result, normalised across providers."""

    url: str
    title: str
    snippet: str
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        _set(self, "metadata", freeze_mapping(self.metadata))

    def __hash__(self) -> int:
        return hash((self.url, self.title))


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """A fetched text resource; ``fetched_at`` is a unix timestamp from the fetcher's clock."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: str
    content_type: str
    fetched_at: float

    def __post_init__(self) -> None:
        _set(self, "headers", freeze_mapping(self.headers))

    def __hash__(self) -> int:
        return hash((self.url, self.status, self.content_type, self.fetched_at))


@dataclass(frozen=True, slots=True)
class Chunk:
    """A unit of text stored in a vector index; ``metadata`` carries source and filter tags."""

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        _set(self, "metadata", freeze_mapping(self.metadata))

    def __hash__(self) -> int:
        return hash((self.id, self.text))


@dataclass(frozen=True, slots=True)
class VectorHit:
    """A chunk found by a vector search, with its similarity score (higher is closer)."""

    chunk: Chunk
    score: float


@dataclass(frozen=True, slots=True)
class Observation:
    """One product-facing event of a run: a step, a result, a note for the user.

    ``render`` is the human-readable line; ``payload`` the structured detail. ``parent_id``
    links an observation to the one it belongs under.
    """

    kind: str
    render: str = ""
    payload: Mapping[str, Any] | None = None
    agent: str = ""
    id: str = ""
    parent_id: str | None = None
    correlation_id: str = ""
    created_at: float = 0.0

    def __post_init__(self) -> None:
        if self.payload is not None:
            _set(self, "payload", freeze_mapping(self.payload))

    def __hash__(self) -> int:
        return hash((self.id, self.kind, self.agent))


# ---- ports ---------------------------------------------------------------------------------


@runtime_checkable
class LLMPort(Protocol):
    """A chat model. ``stream`` is the primitive; ``chat`` is its collected stream."""

    def stream(
        self,
        *,
        messages: Sequence[Message],
        model: str,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_hint: Any = None,
    ) -> AsyncIterator[Delta]: ...

    async def chat(
        self,
        *,
        messages: Sequence[Message],
        model: str,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_hint: Any = None,
    ) -> LLMResult: ...

    async def complete(
        self,
        *,
        system: str,
        user: str,
        model: str,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> LLMResult: ...


class ChatFromStream:
    """``chat`` written once, as LLMPort defines it: the collected ``stream``.

    An adapter (a provider client, a test double) inherits it and implements ``stream`` and
    ``complete``; a cache hit and a live call then reduce to a result the same way.
    """

    def stream(
        self,
        *,
        messages: Sequence[Message],
        model: str,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_hint: Any = None,
    ) -> AsyncIterator[Delta]:
        raise NotImplementedError

    async def chat(
        self,
        *,
        messages: Sequence[Message],
        model: str,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_hint: Any = None,
    ) -> LLMResult:
        """The whole answer: ``stream()`` collected with ``assemble_deltas``."""
        stream = self.stream(
            messages=messages,
            model=model,
            tools=tools,
            response_format=response_format,
            temperature=temperature,
            max_tokens=max_tokens,
            cache_hint=cache_hint,
        )
        return assemble_deltas([delta async for delta in stream])


@runtime_checkable
class ToolPort(Protocol):
    """Anything an agent can execute. ``schema`` is ``None`` for a tool the model is not offered."""

    @property
    def name(self) -> str: ...

    @property
    def schema(self) -> ToolSchema | None: ...

    async def run(self, args: Mapping[str, Any], ctx: Ctx) -> Any: ...


@runtime_checkable
class VectorPort(Protocol):
    """A vector index over text chunks; the adapter embeds."""

    async def upsert(self, chunks: Sequence[Chunk], *, scope: Scope | None = None) -> None: ...

    async def search(
        self,
        query: str,
        k: int = 5,
        *,
        scope: Scope | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> builtins.list[VectorHit]: ...


@runtime_checkable
class StorePort(Protocol):
    """A key-value store with expiry, append-only lists and counters.

    ``get_or_set`` runs ``fn`` at most once per key at a time and never stores a producer that
    raised. A backing store that cannot be reached raises ``StoreUnavailable``; ``increment`` on
    a non-integer raises ``StoreValueError`` (both from ``core.contracts.errors``).
    """

    async def get(self, key: str, *, scope: Scope | None = None) -> Any | None: ...

    async def set(
        self, key: str, value: Any, *, ttl: float | None = None, scope: Scope | None = None
    ) -> None: ...

    async def get_or_set(
        self,
        key: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        ttl: float | None = None,
        scope: Scope | None = None,
    ) -> Any: ...

    async def delete(self, key: str, *, scope: Scope | None = None) -> None: ...

    async def append(self, key: str, value: Any, *, scope: Scope | None = None) -> None: ...

    async def list(self, key: str, *, scope: Scope | None = None) -> builtins.list[Any]: ...

    async def increment(
        self, key: str, by: int = 1, *, ttl: float | None = None, scope: Scope | None = None
    ) -> int: ...


@runtime_checkable
class SearchPort(Protocol):
    """Web search; ``where`` filters on provider metadata (dates, domains)."""

    async def search(
        self, query: str, k: int = 5, *, where: Mapping[str, Any] | None = None
    ) -> builtins.list[SearchHit]: ...


@runtime_checkable
class FetchPort(Protocol):
    """The network, one URL at a time; allow-lists, caching and rate limits are the adapter's."""

    async def fetch(self, url: str, *, timeout_s: float = 10.0) -> FetchResponse: ...


@runtime_checkable
class ClockPort(Protocol):
    """The wall clock: use it instead of ``time.time()`` / ``asyncio.sleep`` so waits are testable."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


@runtime_checkable
class CheckpointPort(Protocol):
    """Durable, versioned run state. One producer owns a ``run_id``."""

    async def save(self, checkpoint: Checkpoint) -> None: ...

    async def latest(self, run_id: str) -> Checkpoint | None: ...

    async def at_version(self, run_id: str, version: int) -> Checkpoint | None: ...

    async def list_versions(self, run_id: str) -> builtins.list[int]: ...

    async def delete(self, run_id: str) -> None: ...


@runtime_checkable
class Span(Protocol):
    """An open tracing span, as handed out by ``TracePort.span``."""

    def set_attribute(self, key: str, value: Any) -> None: ...

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None: ...


@runtime_checkable
class TracePort(Protocol):
    """Operational tracing. ``kind`` is free-form (``"client"``, ``"internal"``, ``"compose"``)."""

    def span(
        self, name: str, kind: str = "internal", attrs: Mapping[str, Any] | None = None
    ) -> AbstractContextManager[Span]: ...

    def current_span_id(self) -> str | None: ...

    def add_event_to_current_span(self, name: str, attrs: Mapping[str, Any] | None = None) -> None: ...


@runtime_checkable
class ObserverPort(Protocol):
    """The product-facing observation stream of a run."""

    async def emit(self, observation: Observation) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class MetricsPort(Protocol):
    """Counters and histograms."""

    def add_counter(self, name: str, value: float = 1, attrs: Mapping[str, Any] | None = None) -> None: ...

    def record_histogram(self, name: str, value: float, attrs: Mapping[str, Any] | None = None) -> None: ...
