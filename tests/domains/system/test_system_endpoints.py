"""The system endpoints on a booted kernel: status, metrics, health transitions, admin access."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import Kernel, PluginStatus, ToolStatus
from tests.kit import booted, make_root

CLEAN_ENV = ("LOG_LEVEL", "PORT", "HOST", "HEALTH_CHECK_INTERVAL", "LOG_STREAM_BACKLOG")


@pytest.fixture
async def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Kernel]:
    for key in CLEAN_ENV:
        monkeypatch.delenv(key, raising=False)
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system",))
    async with booted(root) as kernel:
        yield kernel


@pytest.fixture
async def api(kernel: Kernel) -> AsyncIterator[httpx.AsyncClient]:
    http = kernel.container.get_raw_tools()["http"]
    transport = httpx.ASGITransport(app=http.asgi)  # type: ignore[attr-defined]
    async with httpx.AsyncClient(transport=transport, base_url="http://keel.test") as client:
        yield client


async def test_status_is_the_system_dump(kernel: Kernel, api: httpx.AsyncClient) -> None:
    response = await api.get("/system/status")
    assert response.status_code == 200
    dump = response.json()
    assert set(dump["tools"]) == {"http", "logger", "registry"}
    mine = (
        "SystemHealthPlugin",
        "SystemLogsStreamPlugin",
        "SystemMetricsPlugin",
        "SystemStatusPlugin",
        "ToolHealthPlugin",
    )
    assert {name: dump["plugins"][f"system.{name}"]["status"] for name in mine} == dict.fromkeys(
        mine, "READY"
    )
    assert dump["plugins"]["system.SystemStatusPlugin"]["dependencies"] == ["http", "registry"]


async def test_metrics_has_recent_records_and_per_method_aggregates(api: httpx.AsyncClient) -> None:
    for _ in range(3):
        assert (await api.get("/system/status")).status_code == 200
    response = await api.get("/system/metrics?limit=2")
    assert response.status_code == 200
    body = response.json()
    assert len(body["records"]) == 2
    assert body["process"] == {"pid": os.getpid(), "host": socket.gethostname()}  # per process, says which
    assert set(body["records"][0]) == {"tool", "method", "duration_ms", "success", "timestamp"}
    dumps = body["summary"]["registry.get_system_dump"]
    assert dumps["count"] == 3 and dumps["errors"] == 0
    assert dumps["p50_ms"] <= dumps["p95_ms"] <= dumps["p99_ms"]
    only_http = (await api.get("/system/metrics?tool=http")).json()
    two = (await api.get("/system/metrics?tool=http&tool=registry")).json()
    assert {key.partition(".")[0] for key in two["summary"]} == {"http", "registry"}
    assert only_http["summary"] and all(key.startswith("http.") for key in only_http["summary"])
    assert all(record["tool"] == "http" for record in only_http["records"])


@pytest.mark.parametrize("limit", ["abc", "-1", "1001"])
async def test_metrics_refuses_a_bad_limit(api: httpx.AsyncClient, limit: str) -> None:
    response = await api.get(f"/system/metrics?limit={limit}")
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "limit"


async def health(api: httpx.AsyncClient) -> tuple[int, dict[str, Any]]:
    response = await api.get("/system/health")
    return response.status_code, response.json()


async def test_health_follows_tool_and_plugin_states(kernel: Kernel, api: httpx.AsyncClient) -> None:
    registry = kernel.registry
    status, body = await health(api)
    assert (status, body["status"], body["reasons"], body["degraded"]) == (200, "ok", [], [])

    registry.update_tool_status("logger", ToolStatus.FAIL, "health_check() returned False")
    status, body = await health(api)
    assert (status, body["status"]) == (200, "degraded")  # a shared upstream must not empty the pool
    assert body["degraded"] == [
        {"tool": "logger", "status": "FAIL", "message": "health_check() returned False"}
    ]

    registry.update_tool_status("logger", ToolStatus.DEAD, "gone")
    assert (await health(api))[1]["status"] == "degraded"
    registry.update_tool_status("logger", ToolStatus.OFF, "set LOG_URL")
    assert (await health(api))[1]["status"] == "ok"  # OFF is deliberate, not unhealthy

    registry.register_plugin("demo.Booting", domain="demo", class_name="Booting", dependencies=[])
    status, body = await health(api)
    assert status == 503
    assert body["reasons"] == [{"plugin": "demo.Booting", "status": "RUNNING", "message": "still booting"}]

    registry.update_plugin_status("demo.Booting", PluginStatus.DEAD, "on_boot() raised KeyError")
    status, body = await health(api)
    assert status == 200
    assert body["dead_plugins"]["demo.Booting"] == "on_boot() raised KeyError"
    assert (await api.get("/system/health/ready")).json() == body


async def test_a_required_tool_takes_the_instance_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in CLEAN_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HEALTH_REQUIRED_TOOLS", "logger, nosuch")
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system",))
    async with booted(root) as kernel:
        http = kernel.container.get_raw_tools()["http"]
        transport = httpx.ASGITransport(app=http.asgi)  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=transport, base_url="http://keel.test") as api:
            status, body = await health(api)
            assert status == 503
            assert body["reasons"] == [
                {"tool": "nosuch", "status": None, "required": True, "message": "no such tool is loaded"}
            ]
            assert body["required_tools"] == ["logger", "nosuch"]
            plugin: Any = kernel.plugins["system.SystemHealthPlugin"].instance  # of the root's own import
            plugin.required = frozenset({"logger"})
            assert (await health(api))[0] == 200
            kernel.registry.update_tool_status("logger", ToolStatus.DEAD, "gone")
            status, body = await health(api)
            assert status == 503 and body["reasons"][0]["tool"] == "logger"
            assert (await api.get("/system/health/live")).status_code == 200  # liveness ignores tools


async def test_liveness_and_readiness_while_draining(kernel: Kernel, api: httpx.AsyncClient) -> None:
    live = await api.get("/system/health/live")
    assert (live.status_code, live.json()["status"]) == (200, "ok")
    kernel.request_stop()
    status, body = await health(api)
    assert status == 503 and body["reasons"] == [{"process": "DRAINING", "message": "shutting down"}]
    assert (await api.get("/system/health/live")).status_code == 200


async def test_anonymous_health_shows_statuses_only_once_auth_is_on(
    kernel: Kernel, api: httpx.AsyncClient
) -> None:
    kernel.registry.update_tool_status("logger", ToolStatus.DEAD, "connection refused to /secret/path")
    kernel.registry.register_plugin(
        "demo.Broken",
        domain="demo",
        class_name="Broken",
        dependencies=[],
        status=PluginStatus.DEAD,
        error="on_boot() raised KeyError (/srv/app/domains/demo/plugins/broken.py:3)",
    )
    tokens = {"admin": {"sub": "root", "roles": ["admin"]}, "user": {"sub": "ann", "roles": []}}
    kernel.container.get("http").set_auth_validator(lambda token: tokens.get(token))
    for headers in ({}, {"Authorization": "Bearer user"}, {"Authorization": "Bearer nonsense"}):
        response = await api.get("/system/health", headers=headers)
        assert response.status_code == 200
        assert "/secret/path" not in response.text and "broken.py" not in response.text
        body = response.json()
        assert body["degraded"] == [{"tool": "logger", "status": "DEAD"}]
        assert body["dead_plugins"] == ["demo.Broken"]
    admin = (await api.get("/system/health", headers={"Authorization": "Bearer admin"})).json()
    assert admin["degraded"][0]["message"] == "connection refused to /secret/path"
    assert "broken.py" in admin["dead_plugins"]["demo.Broken"]


async def test_internals_need_an_admin_token_once_auth_is_configured(
    kernel: Kernel, api: httpx.AsyncClient
) -> None:
    tokens = {"admin": {"sub": "root", "roles": ["admin"]}, "user": {"sub": "ann", "roles": []}}
    http = kernel.container.get("http")
    assert (await api.get("/system/status")).status_code == 200  # no auth configured: open
    http.set_auth_validator(lambda token: tokens.get(token))
    for path in ("/system/status", "/system/metrics", "/system/logs/stream"):
        assert (await api.get(path)).status_code == 401
        assert (await api.get(path, headers={"Authorization": "Bearer user"})).status_code == 403
    assert (await api.get("/system/status", headers={"Authorization": "Bearer admin"})).status_code == 200
    assert (await api.get("/system/metrics", headers={"Authorization": "Bearer admin"})).status_code == 200
    assert (await api.get("/system/health")).status_code == 200  # load balancers carry no token
