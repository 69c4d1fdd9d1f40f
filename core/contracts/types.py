"""The agent kernel's value types: the shapes that cross a boundary, and nothing that acts.

Every type is a frozen dataclass, and every container field is frozen too (``FrozenDict`` /
``FrozenList`` from ``core.serialization``, or a tuple), copied at construction so the caller's
own dict or list can never reach the stored value. To change a value, build a new one with
``dataclasses.replace``.

Choices made here (each is tested):

* Optional container fields stay ``None``: ``ChatRequest(tools=None)`` means "advertise nothing"
  and is never turned into an empty list.
* Types whose fields hold dicts or lists hash on an identity subset and compare on everything:
  ToolCall ``(id, name)``, ToolSchema ``(name, description)``, ToolRequest ``(name,
  side_effecting, url_arg)``, ChatRequest ``(model, temperature, max_tokens, len(messages))``,
  Prompt ``(id, version, template, inputs)`` (inputs through ``equality_hash``). Every other type
  here is hashable through its generated hash, so a ``set`` of messages carrying tool calls works.
* ``tool_calls`` fields are tuples (a list passed in is copied into one) so ``Message`` stays
  hashable; ``ChatRequest.messages`` / ``tools`` are ``FrozenList`` so an in-place ``append``
  raises ``TypeError``.
* ``Usage.input_tokens`` counts the uncached part of the prompt only, so ``total_tokens`` is
  input + output + cache-read + cache-write: every token the call processed.
* ``Usage.cost_usd`` is an approximation for display: each addition re-rounds it half-to-even to
  six decimal places, so addition is commutative but neither associative nor identity-preserving.
  The budget's ``Decimal`` ledger is the authority on money.
* A ``Delta`` carries whole tool calls: an adapter buffers a provider's argument fragments and
  emits each ``ToolCall`` once its arguments are complete. ``assemble_deltas`` concatenates text
  and tool calls in stream order and takes the last non-``None`` usage, finish reason, model,
  provider and parsed value (a delta's usage is cumulative for the call); it drops ``partial``.
* ``ChatRequest.temperature`` defaults to ``None`` (the provider's default), like every other
  optional setting. ``cache_hint`` and the ``Any`` fields (``parsed``, ``partial``,
  ``partial_output``, a stream event's payloads) are passed through untouched: they hold objects
  the framework does not own.
* Roles, finish reasons and event kinds have ``StrEnum`` names; fields accept the plain strings
  too, since a ``StrEnum`` member equals its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from core.serialization import (
    FrozenDict,
    equality_hash,
    freeze_mapping,
    freeze_sequence,
)

if TYPE_CHECKING:
    from core.contracts.ports import ToolPort

__all__ = [
    "ChatRequest",
    "Delta",
    "FinishReason",
    "LLMResult",
    "Message",
    "Operation",
    "Prompt",
    "Role",
    "Scope",
    "StreamEvent",
    "StreamEventKind",
    "ToolCall",
    "ToolRequest",
    "ToolSchema",
    "Usage",
    "assemble_deltas",
]

_set = object.__setattr__


def _empty_mapping() -> Mapping[str, Any]:
    return FrozenDict()


def _as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    if type(value) is tuple:
        return value
    if isinstance(value, (str, bytes, Mapping)):
        raise TypeError(f"expected a sequence, got {type(value).__name__}")
    return tuple(value)


class Operation(StrEnum):
    """What kind of work a middleware is looking at."""

    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"


class Role(StrEnum):
    """Who speaks a transcript turn."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class FinishReason(StrEnum):
    """The common reasons a model stops; providers may report others as plain strings."""

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"


class StreamEventKind(StrEnum):
    """The steps of a run an application can observe while streaming it."""

    MESSAGE_DELTA = "message_delta"  # a token (or several) of the answer
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    STEP = "step"
    INTERRUPT = "interrupt"
    FINAL = "final"


@dataclass(frozen=True, slots=True)
class Scope:
    """The tenant a piece of work belongs to; ``Scope()`` is the zero tenant."""

    org_id: int = 0
    domain_id: int = 0

    def key(self) -> str:
        """The prefix that partitions cache keys, memory and meters by tenant."""
        return f"org{self.org_id}:dom{self.domain_id}"


@dataclass(frozen=True, slots=True)
class Usage:
    """What one call consumed: token counts (exact) and an approximate cost in US dollars."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def prompt_tokens(self) -> int:
        """Every token of the prompt, cached or not: what OpenTelemetry's GenAI conventions call
        ``gen_ai.usage.input_tokens`` (the one place that rule is written, see ``core.contracts.genai``)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            round(self.cost_usd + other.cost_usd, 6),
        )

    def __radd__(self, other: object) -> Usage:
        # Lets sum(usages) start from its default 0.
        if other == 0 and not isinstance(other, bool):
            return self + Usage()
        return NotImplemented


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation the model asked for; ``id`` pairs it with its result message."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        _set(self, "arguments", freeze_mapping(self.arguments))

    def __hash__(self) -> int:
        return hash((self.id, self.name))


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """The JSON-Schema advertisement a provider needs to offer a tool to the model."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        _set(self, "parameters", freeze_mapping(self.parameters))

    def __hash__(self) -> int:
        return hash((self.name, self.description))


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of a transcript.

    ``tool_calls`` is set on an assistant turn that asked for tools; ``tool_call_id`` (and
    ``name``) on the ``tool`` turn carrying a result.
    """

    role: str
    content: str = ""
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: Sequence[ToolCall] = ()

    def __post_init__(self) -> None:
        if type(self.tool_calls) is not tuple:
            _set(self, "tool_calls", _as_tuple(self.tool_calls))


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One model call as a unit of work: the transcript, the model and its settings."""

    messages: Sequence[Message]
    model: str
    tools: Sequence[ToolSchema] | None = None
    response_format: Mapping[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    cache_hint: Any = None

    def __post_init__(self) -> None:
        _set(self, "messages", freeze_sequence(self.messages))
        if self.tools is not None:
            _set(self, "tools", freeze_sequence(self.tools))
        if self.response_format is not None:
            _set(self, "response_format", freeze_mapping(self.response_format))

    def __hash__(self) -> int:
        return hash((self.model, self.temperature, self.max_tokens, len(self.messages)))


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool execution as a unit of work.

    ``tool`` is the resolved tool (never frozen: the registry owns it). ``side_effecting`` marks a
    call the idempotency layer must not repeat; ``url_arg`` names the argument the egress guard
    checks. ``call_id`` is the id of the model's tool call this request runs, when there is one.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=_empty_mapping)
    tool: ToolPort | None = None
    side_effecting: bool = False
    url_arg: str | None = None
    call_id: str | None = None

    def __post_init__(self) -> None:
        _set(self, "arguments", freeze_mapping(self.arguments))

    def __hash__(self) -> int:
        return hash((self.name, self.side_effecting, self.url_arg))


@dataclass(frozen=True, slots=True)
class LLMResult:
    """An assembled model response; ``parsed`` is set when an output schema is wired."""

    content: str = ""
    usage: Usage = field(default_factory=Usage)
    tool_calls: Sequence[ToolCall] = ()
    parsed: Any = None
    provider: str | None = None
    model: str | None = None
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if type(self.tool_calls) is not tuple:
            _set(self, "tool_calls", _as_tuple(self.tool_calls))


@dataclass(frozen=True, slots=True)
class Delta:
    """One transport increment of a single model response.

    The terminal delta usually carries ``usage`` and ``finish_reason``. ``partial`` is an
    in-progress typed object (set by an output-coercing middleware); ``parsed`` the strict one.
    ``response_id`` is the id the provider gave the response, when it sent one.
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    parsed: Any = None
    partial: Any = None
    response_id: str | None = None

    def __post_init__(self) -> None:
        if type(self.tool_calls) is not tuple:
            _set(self, "tool_calls", _as_tuple(self.tool_calls))


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One step of a run, as streamed to an application.

    ``partial_output`` is the in-progress typed object forwarded from ``Delta.partial``; it may
    have unset required fields and is ``None`` whenever nothing new arrived.
    """

    kind: str
    text: str = ""
    tool_call: ToolCall | None = None
    tool_result: Any = None
    result: Any = None
    usage: Usage | None = None
    partial_output: Any = None


@dataclass(frozen=True, slots=True)
class Prompt:
    """A versioned prompt template and the inputs it is rendered with."""

    id: str
    version: str
    template: str
    inputs: Mapping[str, Any] = field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        _set(self, "inputs", freeze_mapping(self.inputs))

    def __hash__(self) -> int:
        return hash((self.id, self.version, self.template, equality_hash(self.inputs)))


def assemble_deltas(deltas: Iterable[Delta]) -> LLMResult:
    """Reduce a complete stream of deltas to the response it describes (``partial`` is dropped)."""
    texts: list[str] = []
    tool_calls: list[ToolCall] = []
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    provider: str | None = None
    parsed: Any = None
    for delta in deltas:
        if delta.text:
            texts.append(delta.text)
        if delta.tool_calls:
            tool_calls.extend(delta.tool_calls)
        if delta.usage is not None:
            usage = delta.usage
        if delta.finish_reason is not None:
            finish_reason = delta.finish_reason
        if delta.model is not None:
            model = delta.model
        if delta.provider is not None:
            provider = delta.provider
        if delta.parsed is not None:
            parsed = delta.parsed
    return LLMResult(
        content="".join(texts),
        usage=usage if usage is not None else Usage(),
        tool_calls=tuple(tool_calls),
        parsed=parsed,
        provider=provider,
        model=model,
        finish_reason=finish_reason,
    )
