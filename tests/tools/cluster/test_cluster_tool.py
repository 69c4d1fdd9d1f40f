"""The cluster tool: live processes announce themselves in a shared Redis and drop out by themselves.

Two tools on one Redis namespace stand for two processes here; the service test at the end runs two
real processes (one in this test process, one a subprocess) and reads the cluster from either.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from core.errors import ToolUnavailableError
from core.registry import ToolStatus
from tests.conftest import RedisNamespace
from tests.kit import bound_tool, make_root, serving, until, write
from tests.scale.cluster import KeelProcess
from tools.cluster.cluster_tool import ClusterTool, shared_redis_url

pytestmark = pytest.mark.services

HELLO_V1 = """
    from core import BasePlugin


    class Hello(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/hello", "GET", self.hello)

        async def hello(self, data, context):
            return {"version": 1}
"""
HELLO_V2 = HELLO_V1.replace('{"version": 1}', '{"version": 2}')


def tool_on(root: Path, plugin_file: str | None = None) -> ClusterTool:
    tool = bound_tool(ClusterTool, root)
    if plugin_file is not None:
        tool.kernel_registry.register_plugin(
            "demo.Hello", domain="demo", class_name="Hello", dependencies=[], file=plugin_file
        )
    return tool


@pytest.fixture
def cluster_env(monkeypatch: pytest.MonkeyPatch, redis_namespace: RedisNamespace) -> RedisNamespace:
    for name in ("EVENT_BUS_URL", "STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLUSTER_URL", redis_namespace.url)
    monkeypatch.setenv("CLUSTER_PREFIX", redis_namespace.prefix)
    monkeypatch.setenv("CLUSTER_HEARTBEAT_SECONDS", "0.2")
    return redis_namespace


def test_the_url_comes_from_the_shared_redis_of_the_event_bus_or_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CLUSTER_URL", "EVENT_BUS_URL", "STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert shared_redis_url() is None
    monkeypatch.setenv("STORE_URL", "postgresql://db/app")  # not Redis: nothing to announce in
    assert shared_redis_url() is None
    monkeypatch.setenv("EVENT_BUS_URL", "redis://bus:6379/0")
    assert shared_redis_url() == "redis://bus:6379/0"
    monkeypatch.setenv("CLUSTER_URL", "redis://elsewhere:6379/2")
    assert shared_redis_url() == "redis://elsewhere:6379/2"


async def test_one_process_is_off_and_lists_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CLUSTER_URL", "EVENT_BUS_URL", "STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    tool = tool_on(make_root(tmp_path))
    await tool.setup()
    assert tool.kernel_registry.tool_status("cluster") == ToolStatus.OFF
    assert not tool.enabled
    assert [member["id"] for member in await tool.members()] == [tool.process_id]


async def test_processes_see_each_other_and_a_plugin_file_in_two_versions(
    tmp_path: Path, cluster_env: RedisNamespace
) -> None:
    one, two = make_root(tmp_path, name="one"), make_root(tmp_path, name="two")
    write(one, "domains/demo/plugins/hello.py", HELLO_V1)
    write(two, "domains/demo/plugins/hello.py", HELLO_V2)
    first, second = (
        tool_on(one, "domains/demo/plugins/hello.py"),
        tool_on(two, "domains/demo/plugins/hello.py"),
    )
    await first.setup()
    await second.setup()
    try:
        members = await first.members()
        assert [m["id"] for m in members] == [first.process_id, second.process_id]
        assert members[1]["plugins"] == {"demo.Hello": "RUNNING"} and members[1]["pid"] == os.getpid()
        mismatches = ClusterTool.version_mismatches(members)
        assert list(mismatches) == ["domains/demo/plugins/hello.py"]
        assert sorted(sum(mismatches["domains/demo/plugins/hello.py"].values(), [])) == sorted(
            [first.process_id, second.process_id]
        )
        write(two, "domains/demo/plugins/hello.py", HELLO_V1)  # the second machine catches up
        stop = asyncio.Event()
        beating = asyncio.create_task(second.serve(stop))

        async def agreed() -> bool:
            return not ClusterTool.version_mismatches(await first.members())

        await until(agreed, "both processes run one version of hello.py")
        stop.set()
        await beating  # a clean stop withdraws the announcement at once
        assert [m["id"] for m in await first.members()] == [first.process_id]
    finally:
        await first.shutdown()
        await second.shutdown()


async def test_a_process_that_stops_heartbeating_drops_out_by_itself(
    tmp_path: Path, cluster_env: RedisNamespace
) -> None:
    watcher, silent = tool_on(make_root(tmp_path, name="a")), tool_on(make_root(tmp_path, name="b"))
    await watcher.setup()
    await silent.setup()  # announces once, then never again: as if killed or paused
    try:
        assert len(await watcher.members()) == 2

        async def alone() -> bool:
            return len(await watcher.members()) == 1

        await until(alone, "the silent process expired from the list")
    finally:
        await watcher.shutdown()
        await silent.shutdown()


async def test_an_unreachable_redis_is_a_failure_with_the_reason_never_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTER_URL", "redis://127.0.0.1:1/0")
    tool = tool_on(make_root(tmp_path))
    await tool.setup()
    try:
        assert tool.kernel_registry.tool_status("cluster") == ToolStatus.FAIL
        assert "cannot announce" in (
            tool.kernel_registry.get_system_dump()["tools"]["cluster"]["message"] or ""
        )
        with pytest.raises(ToolUnavailableError):
            await tool.members()
        assert await tool.health_check() is False
    finally:
        await tool.shutdown()


async def test_two_real_processes_list_each_other_and_the_plugin_that_differs(
    tmp_path: Path, cluster_env: RedisNamespace
) -> None:
    roots = []
    for name, source in (("one", HELLO_V1), ("two", HELLO_V2)):
        root = make_root(
            tmp_path, tools=("http", "cluster", "logger", "system"), domains=("system",), name=name
        )
        write(root, "domains/demo/plugins/hello.py", source)
        roots.append(root)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("EVENT_BUS_", "STORE_", "PORT", "HOST", "AUTH_"))
    }
    other = KeelProcess("two", roots[1], {**env, "PORT": "0", "HOST": "127.0.0.1", "LOG_LEVEL": "INFO"})
    other.start()
    try:
        other_url = other.wait_serving()
        async with serving(roots[0]) as (kernel, base_url):
            async with httpx.AsyncClient() as client:
                for url in (base_url, other_url):
                    body = (await client.get(f"{url}/system/cluster")).json()
                    assert body["enabled"] is True
                    assert {p["pid"] for p in body["processes"]} == {os.getpid(), other.pid}
                    differs = body["mismatched_plugin_files"]["domains/demo/plugins/hello.py"]
                    assert len(differs) == 2
                assert (await client.get(f"{other_url}/hello")).json() == {"version": 2}
    finally:
        assert other.stop() == 0, other.output()
