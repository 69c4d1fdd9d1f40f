"""The registry tool: snapshots, per tool.method aggregates, owner-tracked metrics sinks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.container import Container
from core.context import bound, current_plugin_var
from core.registry import MetricRecord, Registry, ToolStatus, nearest_rank
from tools.system.registry_tool import RegistryTool, summarize


@pytest.fixture
def registry() -> RegistryTool:
    tool = RegistryTool()
    tool.bind(project_root=Path("."), registry=Registry())
    return tool


def record(tool: str, method: str, duration_ms: float, success: bool = True) -> MetricRecord:
    return {"tool": tool, "method": method, "duration_ms": duration_ms, "success": success, "timestamp": 0.0}


def test_nearest_rank_percentiles() -> None:
    ordered = [float(n) for n in range(1, 101)]
    assert [nearest_rank(ordered, p) for p in (50, 95, 99, 100)] == [50.0, 95.0, 99.0, 100.0]
    assert nearest_rank([3.0], 99) == 3.0
    assert nearest_rank([1.0, 2.0], 50) == 1.0


def test_summary_per_tool_method() -> None:
    records = [record("db", "query", float(ms)) for ms in range(1, 21)]
    records += [record("db", "query", 100.0, success=False), record("cache", "get", 0.5)]
    summary = summarize(records)
    assert list(summary) == ["cache.get", "db.query"]
    assert summary["cache.get"] == {"count": 1, "errors": 0, "p50_ms": 0.5, "p95_ms": 0.5, "p99_ms": 0.5}
    assert summary["db.query"] == {"count": 21, "errors": 1, "p50_ms": 11.0, "p95_ms": 20.0, "p99_ms": 100.0}


def test_summary_of_real_proxied_calls(registry: RegistryTool) -> None:
    container = Container(registry.kernel_registry)
    proxy = container.add(registry)
    proxy.get_system_dump()
    proxy.get_system_dump()
    summary = registry.get_metrics_summary()
    assert summary["registry.get_system_dump"]["count"] == 2
    assert summary["registry.get_system_dump"]["errors"] == 0
    assert [r["method"] for r in registry.get_metrics()] == ["get_system_dump", "get_system_dump"]


def test_metrics_sinks_are_released_with_their_owner(registry: RegistryTool) -> None:
    seen: dict[str, list[MetricRecord]] = {"audit": [], "ops": []}

    def audit(entry: MetricRecord) -> None:
        seen["audit"].append(entry)

    def ops(entry: MetricRecord) -> None:
        seen["ops"].append(entry)

    with bound(current_plugin_var, "demo.Audit"):
        registry.add_metrics_sink(audit)
    with bound(current_plugin_var, "demo.Ops"):
        registry.add_metrics_sink(ops)
    registry.kernel_registry.emit_to_sinks(record("db", "query", 1.0))
    registry.release_owner("demo.Audit")
    registry.kernel_registry.emit_to_sinks(record("db", "query", 2.0))
    registry.remove_metrics_sink(ops)
    registry.kernel_registry.emit_to_sinks(record("db", "query", 3.0))
    assert [e["duration_ms"] for e in seen["audit"]] == [1.0]
    assert [e["duration_ms"] for e in seen["ops"]] == [1.0, 2.0]
    assert registry.kernel_registry.metrics_sinks == []


def test_tool_status_updates_and_reads(registry: RegistryTool) -> None:
    registry.kernel_registry.register_tool("db")
    registry.update_tool_status("db", "FAIL", "ping failed")
    assert registry.get_tool_status("db") == "FAIL"
    assert registry.get_system_dump()["tools"]["db"]["message"] == "ping failed"
    assert registry.get_tool_status("nope") is None
    with pytest.raises(ValueError):
        registry.update_tool_status("db", "BROKEN")
    registry.update_tool_status("db", ToolStatus.OK)
    assert registry.get_tool_status("db") == "OK"


def test_domain_metadata_round_trips_as_copies(registry: RegistryTool) -> None:
    models: dict[str, Any] = {"user.py": "class User: ..."}
    registry.set_domain_metadata("users", "models", models)
    models["user.py"] = "changed"
    metadata = registry.get_domain_metadata()
    assert metadata == {"users": {"models": {"user.py": "class User: ..."}}}
    metadata["users"]["models"] = {}
    assert registry.get_domain_metadata()["users"]["models"] == {"user.py": "class User: ..."}
    assert registry.get_system_dump()["domains"]["users"]["models"] == {"user.py": "class User: ..."}
