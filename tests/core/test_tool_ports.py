"""Every tool satisfies the port a plugin annotates it with, and ``mypy --strict`` holds plugins to it.

Two checks, because each misses what the other sees: the run-time one compares members, their
async-ness and their parameters (it runs in milliseconds and names the member that drifted); the
static one runs mypy over a conforming plugin and a broken one, so the ports are proven to catch a
misspelt method and a missing ``await`` rather than only to exist.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from core import tool_ports
from tests.kit import PROJECT
from tools.auth.auth_tool import AuthTool
from tools.checkpoint.checkpoint_tool import CheckpointTool
from tools.cluster.cluster_tool import ClusterTool
from tools.coding_cli.coding_cli_tool import CodingCliTool
from tools.context.context_tool import ContextTool
from tools.db.db_tool import DbTool
from tools.event_bus.event_bus_tool import EventBusTool
from tools.http.http_tool import HttpTool
from tools.llm.llm_tool import LlmTool
from tools.logger.logger_tool import LoggerTool
from tools.plugin_watcher.watcher_tool import PluginWatcherTool
from tools.scheduler.scheduler_tool import SchedulerTool
from tools.store.store_tool import StoreTool
from tools.system.registry_tool import RegistryTool
from tools.telemetry.telemetry_tool import TelemetryTool

IMPLEMENTATIONS: dict[str, tuple[type[Any], type[Any]]] = {
    "db": (DbTool, tool_ports.DbPort),
    "http": (HttpTool, tool_ports.HttpPort),
    "event_bus": (EventBusTool, tool_ports.EventBusPort),
    "logger": (LoggerTool, tool_ports.LoggerPort),
    "auth": (AuthTool, tool_ports.AuthPort),
    "registry": (RegistryTool, tool_ports.RegistryPort),
    "telemetry": (TelemetryTool, tool_ports.TelemetryPort),
    "llm": (LlmTool, tool_ports.LLMPort),
    "store": (StoreTool, tool_ports.StorePort),
    "checkpoint": (CheckpointTool, tool_ports.CheckpointPort),
    "scheduler": (SchedulerTool, tool_ports.SchedulerPort),
    "cluster": (ClusterTool, tool_ports.ClusterPort),
    "coding_cli": (CodingCliTool, tool_ports.CodingCliPort),
    "context_manager": (ContextTool, tool_ports.ContextPort),
    "plugin_watcher": (PluginWatcherTool, tool_ports.PluginWatcherPort),
}


def port_members(port: type[Any]) -> list[str]:
    return sorted(
        name
        for klass in port.__mro__
        if klass is not object and klass.__name__ != "Protocol" and klass.__module__ != "typing"
        for name in vars(klass)
        if not name.startswith("_")
    )


def drift(tool: type[Any], port: type[Any]) -> list[str]:
    """What ``tool`` lacks or does differently from ``port``, one line a member."""
    problems = []
    for name in port_members(port):
        wanted = inspect.getattr_static(port, name)
        if not hasattr(tool, name):
            problems.append(f"{name}: missing")
            continue
        found = inspect.getattr_static(tool, name)
        if isinstance(wanted, property):
            if not isinstance(found, property):
                problems.append(f"{name}: the port has a property, the tool {type(found).__name__}")
            continue
        if not callable(wanted):
            continue
        if inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(found) and not (
            inspect.isasyncgenfunction(found)
        ):
            problems.append(f"{name}: async in one and not the other")
        accepted = inspect.signature(found).parameters
        for parameter in inspect.signature(wanted).parameters.values():
            if parameter.name == "self" or parameter.kind in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                continue
            if parameter.name not in accepted and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
                problems.append(f"{name}: does not accept {parameter.name!r}")
    return problems


@pytest.mark.parametrize("key", sorted(IMPLEMENTATIONS))
def test_each_tool_has_every_member_of_its_port(key: str) -> None:
    tool, port = IMPLEMENTATIONS[key]
    assert tool.name == key
    assert drift(tool, port) == []


def test_the_drift_check_sees_a_missing_member_and_a_lost_await() -> None:
    class Half:
        def query(self, sql: str) -> list[dict[str, Any]]:
            return []

    problems = drift(Half, tool_ports.DbPort)
    assert "execute: missing" in problems
    assert "query: async in one and not the other" in problems


def test_every_port_is_exported() -> None:
    ports = {name for name in tool_ports.__all__ if name.endswith("Port")}
    assert ports == {port.__name__ for _, port in IMPLEMENTATIONS.values()}


CONFORMING = """
from __future__ import annotations

from core import BasePlugin
from core.tool_ports import {ports}
{imports}


class Notes(BasePlugin):
    def __init__(self, db: DbPort, http: HttpPort, logger: LoggerPort) -> None:
        self.db = db
        self.http = http
        self.logger = logger

    def on_boot(self) -> None:
        self.http.add_endpoint("/notes/{{note_id}}", "GET", self.read)

    async def read(self, data: dict[str, object], context: dict[str, object]) -> dict[str, object]:
        row = await self.db.query_one("SELECT body FROM notes WHERE id = $1", [data["note_id"]])
        self.logger.info("read %s", data["note_id"])
        return {{"body": None if row is None else row["body"]}}


{checks}
"""

BROKEN = """
from __future__ import annotations

from core.tool_ports import DbPort


class Broken:
    def __init__(self, db: DbPort) -> None:
        self.db = db

    async def read(self) -> object:
        await self.db.querry("SELECT 1")
        row = self.db.query_one("SELECT 1")
        return row["body"]
"""


def test_mypy_strict_accepts_the_tools_and_a_plugin_and_catches_a_broken_plugin(tmp_path: Path) -> None:
    imports = "\n".join(
        f"from {tool.__module__} import {tool.__name__}" for tool, _ in IMPLEMENTATIONS.values()
    )
    checks = "\n\n".join(
        f"def conforms_{key}(tool: {tool.__name__}) -> {port.__name__}:\n    return tool"
        for key, (tool, port) in IMPLEMENTATIONS.items()
    )
    ports = ", ".join(sorted(port.__name__ for _, port in IMPLEMENTATIONS.values()))
    (tmp_path / "conforming.py").write_text(
        CONFORMING.format(ports=ports, imports=imports, checks=checks), encoding="utf-8"
    )
    (tmp_path / "broken.py").write_text(textwrap.dedent(BROKEN), encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--ignore-missing-imports",
            "--explicit-package-bases",
            "--follow-imports=silent",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(tmp_path / "conforming.py"),
            str(tmp_path / "broken.py"),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [line for line in errors if "conforming.py" in line] == []
    broken = "\n".join(line for line in errors if "broken.py" in line)
    assert '"DbPort" has no attribute "querry"' in broken
    assert 'Value of type "Coroutine' in broken  # query_one used without await


def test_every_tool_in_the_tree_has_a_port() -> None:
    """A new tool gets a port too, or plugins injecting it are back to ``Any``."""
    tools = set()
    for path in sorted((PROJECT / "tools").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "BaseTool" for base in node.bases
            ):
                tools.add(node.name)
    assert tools == {tool.__name__ for tool, _ in IMPLEMENTATIONS.values()}
