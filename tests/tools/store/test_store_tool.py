"""What the ``store`` tool adds to the contract: JSON-only values, configuration, outages and
recovery through the kernel's proxy, and several processes sharing one backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from core.contracts.errors import ErrorClass, StoreUnavailable, classify
from core.errors import ToolUnavailableError
from core.registry import ToolStatus
from tests.kit import booted, bound_tool, make_root, started_tool
from tests.tools.db.db_fixtures import Forwarder, through
from tests.tools.store.conftest import StoreUnderTest
from tests.tools.store.services import postgres_url, redis_namespace, schema_created_later, set_up_together
from tools.store.errors import StoreEncodeError
from tools.store.store_tool import StoreTool


@pytest.mark.parametrize(
    "value",
    [{1, 2}, b"bytes", float("nan"), float("inf"), object(), {"ok": [1, {2, 3}]}, {1: "non-string key"}],
    ids=["set", "bytes", "nan", "inf", "object", "nested-set", "int-key"],
)
async def test_values_that_are_not_json_are_refused_before_anything_is_written(
    tool_subject: StoreUnderTest, value: Any
) -> None:
    store = tool_subject.store
    if isinstance(value, dict) and 1 in value:
        # JSON turns a non-string key into a string: accepted, and read back as JSON gives it.
        await store.set("k", value)
        assert await store.get("k") == {"1": "non-string key"}
        return
    with pytest.raises(StoreEncodeError, match="the value for 'k' is not a JSON document"):
        await store.set("k", value)
    with pytest.raises(StoreEncodeError):
        await store.append("k", value)

    async def produce() -> Any:
        return value

    with pytest.raises(StoreEncodeError):
        await store.get_or_set("k", produce)
    assert await store.get("k") is None
    assert classify(StoreEncodeError("x")) is ErrorClass.PERMANENT


async def test_tuples_come_back_as_lists_everywhere(tool_subject: StoreUnderTest) -> None:
    await tool_subject.store.set("t", {"pair": (1, 2)})
    assert await tool_subject.store.get("t") == {"pair": [1, 2]}


async def test_get_or_set_returns_what_was_stored(tool_subject: StoreUnderTest) -> None:
    async def produce() -> dict[str, Any]:
        return {"pair": (1, 2)}

    assert await tool_subject.store.get_or_set("t", produce) == {"pair": [1, 2]}


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("mongodb://localhost", "STORE_URL scheme 'mongodb' is not supported"),
        ("sqlite://relative.db", "write sqlite:///relative/path.db"),
    ],
)
async def test_a_store_url_that_cannot_be_used_makes_the_tool_dead_and_every_call_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, fragment: str
) -> None:
    monkeypatch.setenv("STORE_URL", url)
    root = make_root(tmp_path, tools=("store",))
    async with booted(root) as kernel:
        state = kernel.registry.get_system_dump()["tools"]["store"]
        assert state["status"] == ToolStatus.DEAD and fragment in state["message"]
        with pytest.raises(StoreUnavailable, match="the store is misconfigured"):
            await kernel.container.get("store").get("k")


async def test_the_default_is_in_memory_and_the_dump_says_so(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("store",))
    async with booted(root) as kernel:
        state = kernel.registry.get_system_dump()["tools"]["store"]
        assert state["status"] == ToolStatus.OK
        assert state["message"] == "in-process memory (nothing survives a restart)"
        store = kernel.container.get("store")
        await store.set("k", 1)
        assert await store.get("k") == 1
        assert await store.health_check() is True
        assert [r["method"] for r in kernel.registry.get_metrics()][-3:] == ["set", "get", "health_check"]


async def test_a_sqlite_store_survives_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORE_URL", "sqlite:///data/store.db")
    async with started_tool(StoreTool, tmp_path) as store:
        await store.set("kept", {"v": 1})
        await store.increment("n", 3)
    async with started_tool(StoreTool, tmp_path) as store:
        assert await store.get("kept") == {"v": 1}
        assert await store.increment("n") == 4
    assert (tmp_path / "data" / "store.db").exists()


@asynccontextmanager
async def shared_backend(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """Point STORE_URL at one backend two tool instances (two "processes") will share."""
    if backend == "sqlite":
        monkeypatch.setenv("STORE_URL", f"sqlite:///{tmp_path}/shared.db")
        yield
        return
    service: AbstractAsyncContextManager[Any] = (
        postgres_url() if backend == "postgresql" else redis_namespace()
    )
    async with service as resource:
        if backend == "postgresql":
            monkeypatch.setenv("STORE_URL", resource)
        else:
            monkeypatch.setenv("STORE_URL", resource[0])
            monkeypatch.setenv("STORE_KEY_PREFIX", resource[1])
        yield


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
async def test_two_instances_share_values_and_never_lose_an_increment(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shared_backend(backend, tmp_path, monkeypatch):
        async with (
            started_tool(StoreTool, tmp_path / "a") as first,
            started_tool(StoreTool, tmp_path / "b") as second,
        ):
            await first.set("greeting", "hi")
            assert await second.get("greeting") == "hi"
            await asyncio.gather(*(s.increment("total") for s in [first, second] * 20))
            assert await first.get("total") == 40
            await asyncio.gather(*(s.append("log", n) for n, s in enumerate([first, second] * 5)))
            assert sorted(await second.list("log")) == list(range(10))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
async def test_across_instances_the_first_value_stored_wins(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shared_backend(backend, tmp_path, monkeypatch):
        async with (
            started_tool(StoreTool, tmp_path / "a") as first,
            started_tool(StoreTool, tmp_path / "b") as second,
        ):
            both_started = asyncio.Barrier(2)

            def producer(value: str) -> Any:
                async def produce() -> str:
                    await both_started.wait()  # both instances missed the key before either stored
                    return value

                return produce

            results = await asyncio.gather(
                first.get_or_set("winner", producer("first")), second.get_or_set("winner", producer("second"))
            )
            assert results[0] == results[1] == await first.get("winner")


async def test_an_unopenable_sqlite_file_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "blocker").write_text("a file where the folder should be")
    monkeypatch.setenv("STORE_URL", "sqlite:///blocker/store.db")
    tool = bound_tool(StoreTool, tmp_path)
    with pytest.raises(StoreUnavailable) as caught:
        await tool.setup()
    assert isinstance(caught.value, ToolUnavailableError)
    assert classify(caught.value) is ErrorClass.TRANSIENT


@pytest.mark.parametrize("backend", ["postgresql", "redis"])
async def test_an_outage_marks_the_tool_dead_and_the_next_success_recovers_it(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service: AbstractAsyncContextManager[Any] = (
        postgres_url() if backend == "postgresql" else redis_namespace()
    )
    async with service as resource:
        url = resource if backend == "postgresql" else resource[0]
        if backend == "redis":
            monkeypatch.setenv("STORE_KEY_PREFIX", resource[1])
        parts = urlsplit(url)
        relay = Forwarder(
            parts.hostname or "127.0.0.1", parts.port or (5432 if backend == "postgresql" else 6379)
        )
        await relay.start()
        monkeypatch.setenv("STORE_URL", through(url, relay.port))
        monkeypatch.setenv("STORE_CONNECT_TIMEOUT", "2")
        root = make_root(tmp_path, tools=("store",))
        try:
            async with booted(root) as kernel:
                store = kernel.container.get("store")
                await store.set("k", "before")
                await relay.stop()
                with pytest.raises(StoreUnavailable):
                    await store.get("k")
                assert kernel.registry.tool_status("store") is ToolStatus.DEAD
                assert await store.health_check() is False
                await relay.start()
                assert await store.get("k") == "before"
                state = kernel.registry.get_system_dump()["tools"]["store"]
                assert state["status"] == ToolStatus.OK and state["message"] == "Recovered"
        finally:
            await relay.stop()


async def test_an_unreachable_server_at_boot_is_dead_and_connects_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with postgres_url() as url:
        parts = urlsplit(url)
        relay = Forwarder(parts.hostname or "127.0.0.1", parts.port or 5432)
        monkeypatch.setenv("STORE_URL", through(url, relay.port))
        monkeypatch.setenv("STORE_CONNECT_TIMEOUT", "2")
        root = make_root(tmp_path, tools=("store",))
        try:
            async with booted(root) as kernel:
                state = kernel.registry.get_system_dump()["tools"]["store"]
                assert state["status"] == ToolStatus.DEAD
                assert "cannot connect to the store's PostgreSQL" in state["message"]
                await relay.start()
                store = kernel.container.get("store")
                await store.set("late", True)
                assert await store.get("late") is True
                assert kernel.registry.tool_status("store") is ToolStatus.OK
        finally:
            await relay.stop()


async def test_processes_booting_together_on_a_fresh_database_all_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORE_POOL_MAX", "1")
    for round_ in range(3):  # the catalog collision this guards against is a race: give it chances
        async with postgres_url() as url:
            monkeypatch.setenv("STORE_URL", url)
            tools = [bound_tool(StoreTool, tmp_path / f"{round_}-{n}") for n in range(8)]
            assert await set_up_together(tools) == []


async def test_a_database_that_refuses_the_table_at_boot_is_dead_and_recovers_once_it_accepts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with schema_created_later() as (url, create_schema):
        monkeypatch.setenv("STORE_URL", url)
        async with booted(make_root(tmp_path, tools=("store",))) as kernel:
            state = kernel.registry.get_system_dump()["tools"]["store"]
            assert state["status"] == ToolStatus.DEAD
            assert "the store's PostgreSQL cannot create its table" in state["message"]
            await create_schema()
            store = kernel.container.get("store")
            await store.set("k", "v")
            assert await store.get("k") == "v"
            assert kernel.registry.tool_status("store") is ToolStatus.OK
