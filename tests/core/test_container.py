"""The ToolProxy: timing, the hybrid DEAD policy, and shape preservation of every call kind."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from core import (
    BaseTool,
    ConflictError,
    Container,
    InvalidInputError,
    KeelError,
    NotFoundError,
    Registry,
    ToolStatus,
    ToolUnavailableError,
)
from core.container import DEAD_STREAK
from core.contracts.errors import ToolArgumentError


class Outage(ToolUnavailableError):
    pass


class Sample(BaseTool):
    name = "sample"

    def __init__(self) -> None:
        self.fail_with: Exception | None = None
        self.app = object()
        self.factory = dict  # a callable attribute that is not a method

    def add(self, a: int, b: int) -> int:
        if self.fail_with:
            raise self.fail_with
        return a + b

    async def aadd(self, a: int, b: int) -> int:
        await asyncio.sleep(0)
        if self.fail_with:
            raise self.fail_with
        return a + b

    async def count(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i
        if self.fail_with:
            raise self.fail_with

    async def forever(self) -> None:
        await asyncio.Event().wait()

    def _private(self) -> str:
        return "private"


@pytest.fixture
def registry() -> Registry:
    return Registry()


@pytest.fixture
def tool() -> Sample:
    return Sample()


@pytest.fixture
def proxy(registry: Registry, tool: Sample) -> Any:
    container = Container(registry)
    container.add(tool)
    return container.get("sample")


def test_sync_method_stays_sync_and_is_recorded(proxy: Any, registry: Registry) -> None:
    assert not inspect.iscoroutinefunction(proxy.add)
    assert proxy.add(2, 3) == 5
    (record,) = registry.get_metrics()
    assert set(record) == {"tool", "method", "duration_ms", "success", "timestamp"}
    assert (record["tool"], record["method"], record["success"]) == ("sample", "add", True)
    assert record["duration_ms"] >= 0


async def test_coroutine_stays_coroutine(proxy: Any, registry: Registry) -> None:
    assert inspect.iscoroutinefunction(proxy.aadd)
    assert await proxy.aadd(1, 1) == 2
    assert registry.get_metrics()[0]["method"] == "aadd"


async def test_async_generator_stays_async_generator_and_is_timed_until_exhausted(
    proxy: Any, registry: Registry
) -> None:
    assert inspect.isasyncgenfunction(proxy.count)
    items = [i async for i in proxy.count(3)]
    assert items == [0, 1, 2]
    assert [(r["method"], r["success"]) for r in registry.get_metrics()] == [("count", True)]


async def test_async_generator_closed_early_is_a_success(proxy: Any, registry: Registry) -> None:
    stream = proxy.count(10)
    assert await anext(stream) == 0
    await stream.aclose()
    assert [(r["method"], r["success"]) for r in registry.get_metrics()] == [("count", True)]


async def test_async_generator_failure_counts(proxy: Any, tool: Sample, registry: Registry) -> None:
    tool.fail_with = RuntimeError("mid-stream")
    with pytest.raises(RuntimeError):
        async for _ in proxy.count(2):
            pass
    assert registry.get_metrics()[-1]["success"] is False


def test_non_method_attributes_come_back_as_themselves(proxy: Any, tool: Sample) -> None:
    assert proxy.app is tool.app
    assert proxy.factory is dict
    assert proxy.name == "sample"
    assert proxy._private() == "private"


def test_unavailable_error_marks_dead_at_once(proxy: Any, tool: Sample, registry: Registry) -> None:
    tool.fail_with = Outage("connection refused")
    with pytest.raises(Outage):
        proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.DEAD
    assert "connection refused" in registry.get_system_dump()["tools"]["sample"]["message"]


def test_streak_of_ordinary_failures_marks_dead(proxy: Any, tool: Sample, registry: Registry) -> None:
    tool.fail_with = ValueError("bad input")
    for attempt in range(DEAD_STREAK):
        assert registry.tool_status("sample") is ToolStatus.OK, attempt
        with pytest.raises(ValueError):
            proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.DEAD


def test_success_resets_the_streak(proxy: Any, tool: Sample, registry: Registry) -> None:
    for _ in range(3):
        for _ in range(DEAD_STREAK - 1):
            tool.fail_with = ValueError("business error")
            with pytest.raises(ValueError):
                proxy.add(1, 2)
        tool.fail_with = None
        proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.OK


def test_success_after_dead_recovers(proxy: Any, tool: Sample, registry: Registry) -> None:
    tool.fail_with = Outage("down")
    with pytest.raises(Outage):
        proxy.add(1, 2)
    tool.fail_with = None
    assert proxy.add(1, 2) == 3
    dump = registry.get_system_dump()["tools"]["sample"]
    assert (dump["status"], dump["message"]) == ("OK", "Recovered")


def test_off_tool_stays_off_however_often_it_fails(proxy: Any, tool: Sample, registry: Registry) -> None:
    registry.update_tool_status("sample", ToolStatus.OFF, "set SAMPLE_URL")
    tool.fail_with = RuntimeError("not configured")
    for _ in range(DEAD_STREAK * 2):
        with pytest.raises(RuntimeError):
            proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.OFF


async def test_cancellation_is_never_a_tool_failure(proxy: Any, registry: Registry) -> None:
    for _ in range(DEAD_STREAK + 1):
        task = asyncio.create_task(proxy.forever())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert registry.tool_status("sample") is ToolStatus.OK
    assert registry.get_metrics() == []


def test_no_retries_ever(registry: Registry) -> None:
    calls = []

    class Flaky(BaseTool):
        name = "flaky"

        def charge(self) -> None:
            calls.append(1)
            raise ConnectionError("reset")

    container = Container(registry)
    container.add(Flaky())
    with pytest.raises(ConnectionError):
        container.get("flaky").charge()
    assert calls == [1]


def test_metrics_sink_that_raises_never_breaks_the_call(
    proxy: Any, registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[dict[str, Any]] = []

    def broken(record: dict[str, Any]) -> None:
        raise RuntimeError("sink is broken")

    registry.add_metrics_sink(broken)
    registry.add_metrics_sink(seen.append)
    assert proxy.add(1, 1) == 2
    assert [r["method"] for r in seen] == ["add"]
    assert "sink is broken" in caplog.text


def test_ring_buffer_keeps_the_last_thousand(proxy: Any, registry: Registry) -> None:
    for i in range(1100):
        proxy.add(i, 0)
    assert len(registry.get_metrics()) == 1000


async def test_span_factory_wraps_every_kind_of_call(proxy: Any, tool: Sample) -> None:
    spans: list[tuple[str, str, str]] = []

    @contextmanager
    def factory(tool_name: str, method: str) -> Iterator[None]:
        spans.append((tool_name, method, "open"))
        try:
            yield
        except Exception as exc:
            spans.append((tool_name, method, f"error {type(exc).__name__}"))
            raise
        spans.append((tool_name, method, "closed"))

    proxy._keel_container.register_span_factory(factory)
    proxy.add(1, 2)
    await proxy.aadd(1, 2)
    _ = [i async for i in proxy.count(2)]
    tool.fail_with = ValueError("x")
    with pytest.raises(ValueError):
        proxy.add(1, 2)
    assert spans == [
        ("sample", "add", "open"),
        ("sample", "add", "closed"),
        ("sample", "aadd", "open"),
        ("sample", "aadd", "closed"),
        ("sample", "count", "open"),
        ("sample", "count", "closed"),
        ("sample", "add", "open"),
        ("sample", "add", "error ValueError"),
    ]


def test_raw_tools_bypass_the_proxy(registry: Registry, tool: Sample) -> None:
    container = Container(registry)
    container.add(tool)
    assert container.get_raw_tools() == {"sample": tool}
    raw = container.get_raw_tools()["sample"]
    assert isinstance(raw, Sample)
    raw.add(1, 1)
    assert registry.get_metrics() == []


def test_a_tool_whose_setup_failed_is_not_revived_by_a_call(proxy: Any, registry: Registry) -> None:
    registry.mark_setup_failed("sample", "setup() raised ValueError: key too short")
    assert proxy.add(1, 1) == 2
    assert registry.tool_status("sample") is ToolStatus.DEAD
    registry.update_tool_status("sample", ToolStatus.OK, "Recovered")  # a passing health check
    tool_error = ValueError("x")
    proxy._keel_tool.fail_with = tool_error
    with pytest.raises(ValueError):
        proxy.add(1, 1)
    proxy._keel_tool.fail_with = None
    assert registry.tool_status("sample") is ToolStatus.OK


# -- caller errors never count toward DEAD ----------------------------------------------------


class Keyworded(BaseTool):
    name = "keyworded"

    def add_endpoint(self, path: str, *, request_model: object = None, tags: list[str] | None = None) -> str:
        return path

    async def complete(self, *, user: str, model: str) -> str:
        return f"{model}:{user}"

    async def lines(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    def broken(self) -> None:
        raise TypeError("unsupported operand type(s)")  # the tool's own bug, not the caller's


@pytest.fixture
def keyworded(registry: Registry) -> Any:
    container = Container(registry)
    container.add(Keyworded())
    return container.get("keyworded")


def test_arguments_that_do_not_bind_never_count(keyworded: Any, registry: Registry) -> None:
    for _ in range(DEAD_STREAK + 1):
        with pytest.raises(TypeError) as caught:
            keyworded.add_endpoint("/x", request_modle=dict)
    assert registry.tool_status("keyworded") is ToolStatus.OK
    message = str(caught.value)
    assert "did you mean 'request_model'" in message
    assert "keyworded.add_endpoint(path, *, request_model=None, tags=None)" in message
    assert "(called at tests/core/test_container.py:" in message
    assert [r["success"] for r in registry.get_metrics()] == [False] * (DEAD_STREAK + 1)


async def test_a_missing_keyword_of_a_coroutine_never_counts(keyworded: Any, registry: Registry) -> None:
    for _ in range(DEAD_STREAK + 1):
        with pytest.raises(TypeError, match="missing a required argument: 'model'"):
            await keyworded.complete(user="hi")
    assert registry.tool_status("keyworded") is ToolStatus.OK
    assert await keyworded.complete(user="hi", model="m") == "m:hi"


async def test_bad_arguments_to_a_stream_never_count(keyworded: Any, registry: Registry) -> None:
    for _ in range(DEAD_STREAK + 1):
        with pytest.raises(TypeError, match="keyworded.lines"):
            async for _ in keyworded.lines(1, 2):
                pass
    assert registry.tool_status("keyworded") is ToolStatus.OK


def test_a_type_error_inside_the_tool_still_counts(keyworded: Any, registry: Registry) -> None:
    for _ in range(DEAD_STREAK):
        with pytest.raises(TypeError, match="unsupported operand"):
            keyworded.broken()
    assert registry.tool_status("keyworded") is ToolStatus.DEAD


@pytest.mark.parametrize(
    "error",
    [
        InvalidInputError("bad"),
        NotFoundError("nope"),
        ConflictError("taken"),
        ToolArgumentError("bad argument"),
    ],
)
def test_keel_errors_about_the_input_never_count(
    proxy: Any, tool: Sample, registry: Registry, error: Exception
) -> None:
    tool.fail_with = error
    for _ in range(DEAD_STREAK * 2):
        with pytest.raises(type(error)):
            proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.OK


def test_a_caller_error_does_not_reset_the_streak(proxy: Any, tool: Sample, registry: Registry) -> None:
    for error in [RuntimeError("a")] * (DEAD_STREAK - 1) + [NotFoundError("n"), RuntimeError("b")]:
        tool.fail_with = error
        with pytest.raises(type(error)):
            proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.DEAD


def test_a_declared_caller_error_never_counts(proxy: Any, tool: Sample, registry: Registry) -> None:
    class Declared(KeelError):
        caller_error = True

    tool.fail_with = Declared("the row exists")
    for _ in range(DEAD_STREAK * 2):
        with pytest.raises(Declared):
            proxy.add(1, 2)
    assert registry.tool_status("sample") is ToolStatus.OK


def test_an_unknown_method_says_what_exists(proxy: Any) -> None:
    with pytest.raises(AttributeError) as caught:
        proxy.ad(1, 2)
    message = str(caught.value)
    assert "did you mean 'add'" in message and "it has: aadd, add" in message
    assert "test_container.py:" in message
    assert getattr(proxy, "absent", None) is None
