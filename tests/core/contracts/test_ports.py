"""The ports: runtime-checkable protocols, their signatures, and their value types."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import pytest

from core.contracts import ports
from core.contracts.ports import (
    Checkpoint,
    CheckpointPort,
    CheckpointStatus,
    Chunk,
    ClockPort,
    FetchPort,
    FetchResponse,
    LLMPort,
    MetricsPort,
    Observation,
    ObserverPort,
    SearchHit,
    SearchPort,
    Span,
    StorePort,
    ToolPort,
    TracePort,
    VectorHit,
    VectorPort,
)
from core.contracts.types import Delta, LLMResult, Message, Scope, ToolSchema, Usage, assemble_deltas
from core.serialization import FrozenDict

PORT_NAMES = [
    "LLMPort",
    "ToolPort",
    "VectorPort",
    "StorePort",
    "SearchPort",
    "FetchPort",
    "ClockPort",
    "CheckpointPort",
    "TracePort",
    "ObserverPort",
    "MetricsPort",
]


class MiniLLM:
    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(
        self, *, messages: Sequence[Message], model: str, **settings: Any
    ) -> AsyncIterator[Delta]:
        yield Delta(text=self.text)
        yield Delta(usage=Usage(10, 5), finish_reason="stop", provider="mini", model=model)

    async def chat(self, *, messages: Sequence[Message], model: str, **settings: Any) -> LLMResult:
        return assemble_deltas([d async for d in self.stream(messages=messages, model=model, **settings)])

    async def complete(self, *, system: str, user: str, model: str, **settings: Any) -> LLMResult:
        return await self.chat(messages=[Message("system", system), Message("user", user)], model=model)


class MiniTool:
    name = "echo"
    schema = ToolSchema("echo")

    async def run(self, args: Mapping[str, Any], ctx: Any) -> Any:
        return dict(args)


class MiniVector:
    async def upsert(self, chunks: Sequence[Chunk], *, scope: Scope | None = None) -> None: ...

    async def search(self, query: str, k: int = 5, **kw: Any) -> list[VectorHit]:
        return []


class MiniStore:
    async def get(self, key: str, *, scope: Scope | None = None) -> Any: ...
    async def set(self, key: str, value: Any, **kw: Any) -> None: ...
    async def get_or_set(self, key: str, fn: Any, **kw: Any) -> Any: ...
    async def delete(self, key: str, **kw: Any) -> None: ...
    async def append(self, key: str, value: Any, **kw: Any) -> None: ...
    async def list(self, key: str, **kw: Any) -> list[Any]:
        return []

    async def increment(self, key: str, by: int = 1, **kw: Any) -> int:
        return by


class MiniSearch:
    async def search(self, query: str, k: int = 5, **kw: Any) -> list[SearchHit]:
        return []


class MiniFetch:
    async def fetch(self, url: str, *, timeout_s: float = 10.0) -> FetchResponse:
        raise KeyError(url)


class MiniClock:
    def now(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None: ...


class MiniCheckpoints:
    async def save(self, checkpoint: Checkpoint) -> None: ...
    async def latest(self, run_id: str) -> Checkpoint | None: ...
    async def at_version(self, run_id: str, version: int) -> Checkpoint | None: ...
    async def list_versions(self, run_id: str) -> list[int]:
        return []

    async def delete(self, run_id: str) -> None: ...


class MiniSpan:
    def set_attribute(self, key: str, value: Any) -> None: ...
    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None: ...


class MiniTrace:
    @contextlib.contextmanager
    def span(
        self, name: str, kind: str = "internal", attrs: Mapping[str, Any] | None = None
    ) -> Iterator[MiniSpan]:
        yield MiniSpan()

    def current_span_id(self) -> str | None:
        return None

    def add_event_to_current_span(self, name: str, attrs: Mapping[str, Any] | None = None) -> None: ...


class MiniObserver:
    async def emit(self, observation: Observation) -> None: ...
    async def close(self) -> None: ...


class MiniMetrics:
    def add_counter(self, name: str, value: float = 1, attrs: Any = None) -> None: ...
    def record_histogram(self, name: str, value: float, attrs: Any = None) -> None: ...


IMPLEMENTATIONS: dict[Any, object] = {
    LLMPort: MiniLLM("ok"),
    ToolPort: MiniTool(),
    VectorPort: MiniVector(),
    StorePort: MiniStore(),
    SearchPort: MiniSearch(),
    FetchPort: MiniFetch(),
    ClockPort: MiniClock(),
    CheckpointPort: MiniCheckpoints(),
    TracePort: MiniTrace(),
    ObserverPort: MiniObserver(),
    MetricsPort: MiniMetrics(),
    Span: MiniSpan(),
}


def test_there_are_eleven_ports_and_each_is_a_runtime_checkable_protocol() -> None:
    found = sorted(name for name in ports.__all__ if name.endswith("Port"))
    assert found == sorted(PORT_NAMES)
    for name in PORT_NAMES:
        port = getattr(ports, name)
        assert getattr(port, "_is_protocol", False) and getattr(port, "_is_runtime_protocol", False)


@pytest.mark.parametrize("port", IMPLEMENTATIONS, ids=lambda p: p.__name__)
def test_a_structural_implementation_satisfies_its_port_and_a_stranger_does_not(port: type) -> None:
    assert isinstance(IMPLEMENTATIONS[port], port)
    assert not isinstance(object(), port)


async def test_the_documented_llm_calls_are_valid_and_chat_is_the_collected_stream() -> None:
    llm = MiniLLM("answer")
    calls: dict[str, dict[str, Any]] = {
        "stream": {"messages": [Message("user", "hi")], "model": "m"},
        "chat": {"messages": [Message("user", "hi")], "model": "m"},
        "complete": {"system": "s", "user": "u", "model": "m"},
    }
    for name, kwargs in calls.items():
        inspect.signature(getattr(LLMPort, name)).bind(llm, **kwargs)
    chatted = await llm.chat(messages=[Message("user", "hi")], model="m")
    streamed = assemble_deltas([d async for d in llm.stream(messages=[Message("user", "hi")], model="m")])
    assert chatted == streamed and chatted.usage.total_tokens == 15


def test_store_increment_takes_a_positional_amount_and_keyword_ttl_and_scope() -> None:
    signature = inspect.signature(StorePort.increment)
    signature.bind(MiniStore(), "ratelimit:user-7", 1, ttl=60)
    signature.bind(MiniStore(), "k", scope=Scope(7, 2))
    assert signature.parameters["by"].default == 1
    for method in ("get", "set", "get_or_set", "delete", "append", "list", "increment"):
        parameter = inspect.signature(getattr(StorePort, method)).parameters["scope"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None


def test_checkpoint_status_names_live_and_terminal_states() -> None:
    assert {s.value for s in CheckpointStatus} == {"running", "suspended", "completed", "failed", "cancelled"}
    assert [s for s in CheckpointStatus if s.is_terminal] == [
        CheckpointStatus.COMPLETED,
        CheckpointStatus.FAILED,
        CheckpointStatus.CANCELLED,
    ]


def test_checkpoint_converts_a_status_string_and_rejects_an_unknown_one() -> None:
    checkpoint = Checkpoint("r1", 2, {"turn": 3}, 1.7e9, "suspended")  # type: ignore[arg-type]
    assert checkpoint.status is CheckpointStatus.SUSPENDED
    with pytest.raises(ValueError):
        Checkpoint("r1", 2, {}, 0.0, "paused")  # type: ignore[arg-type]


def test_checkpoint_hashes_on_its_durable_key() -> None:
    first = Checkpoint("r1", 1, {"turn": [1]}, 0.0, CheckpointStatus.RUNNING)
    second = Checkpoint("r1", 1, {"turn": [2]}, 0.0, CheckpointStatus.RUNNING)
    assert hash(first) == hash(second) == hash(("r1", 1)) and first != second


def test_search_hit_and_fetch_response_build_positionally_as_in_the_testing_guide() -> None:
    hit = SearchHit("https://ex/1", "Cert rotation", "rotate every 90d")
    assert (hit.score, hit.metadata) == (None, {})
    assert hash(hit) == hash(SearchHit("https://ex/1", "Cert rotation", "other snippet", 0.3))
    response = FetchResponse(
        "https://ex/1", 200, {"content-type": "text/html"}, "<p>hi</p>", "text/html", 1.7e9
    )
    assert response.body == "<p>hi</p>" and type(response.headers) is FrozenDict
    with pytest.raises(TypeError):
        response.headers["etag"] = "x"
    assert hash(response) == hash(("https://ex/1", 200, "text/html", 1.7e9))


def test_observation_payload_is_frozen_and_optional() -> None:
    observation = Observation("result", "done", payload={"ok": [True]}, agent="analyst")
    assert type(observation.payload) is FrozenDict
    assert Observation("step").payload is None
