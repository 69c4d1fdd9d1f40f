"""``keel routes``: every route of a temporary project, with the plugin that registered it and its
auth, the shadowing between two plugins' routes (``/x/me`` is matched before ``/x/{id}``), and a
plugin whose route is refused at boot reported with exit 1. Run as a subprocess, as a person runs it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.core.cli.cli_kit import keel
from tests.kit import make_root, write

ITEMS = """
from typing import Any

from core import BasePlugin


class Items(BasePlugin):
    def __init__(self, http: Any) -> None:
        self.http = http

    async def on_boot(self) -> None:
        self.http.add_endpoint("/x/{id}", "GET", self.one)
        self.http.add_sse_endpoint("/x/feed/events", self.one, auth="optional")

    async def one(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {}
"""

ME = """
from typing import Any

from core import BasePlugin


class Me(BasePlugin):
    def __init__(self, http: Any) -> None:
        self.http = http

    async def on_boot(self) -> None:
        self.http.add_endpoint("/x/me", "GET", self.me, auth=True)
        self.http.add_endpoint("/x/admin", "POST", self.me, auth="admin")

    async def me(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {}
"""

SAME_ROUTE = """
from typing import Any

from core import BasePlugin


class Again(BasePlugin):
    def __init__(self, http: Any) -> None:
        self.http = http

    async def on_boot(self) -> None:
        self.http.add_endpoint("/x/admin", "POST", self.again)

    async def again(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {}
"""


def project(tmp_path: Path) -> Path:
    root = make_root(tmp_path, tools=("logger", "http"))
    write(root, "domains/x/plugins/items.py", ITEMS)
    write(root, "domains/x/plugins/me.py", ME)
    return root


def test_routes_lists_each_route_with_its_plugin_and_auth_and_the_shadowing(tmp_path: Path) -> None:
    result = keel(project(tmp_path), "routes")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split() for line in lines[:5]] == [
        ["METHOD", "PATH", "PLUGIN", "AUTH"],
        ["POST", "/x/admin", "x.Me", "admin"],
        ["GET", "/x/feed/events", "x.Items", "optional", "(sse)"],
        ["GET", "/x/me", "x.Me", "token"],
        ["GET", "/x/{id}", "x.Items", "open"],
    ], result.stdout
    assert lines[5] == "4 route(s)"
    assert lines[6:] == [
        "shadowing: GET /x/me (x.Me) is matched before GET /x/{id} (x.Items), which it would otherwise hide"
    ], result.stdout


def test_routes_json_carries_the_same_facts(tmp_path: Path) -> None:
    result = keel(project(tmp_path), "routes", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {(r["method"], r["path"]): (r["plugin"], r["auth"]) for r in report["routes"]} == {
        ("POST", "/x/admin"): ("x.Me", "admin"),
        ("GET", "/x/feed/events"): ("x.Items", "optional (sse)"),
        ("GET", "/x/me"): ("x.Me", "token"),
        ("GET", "/x/{id}"): ("x.Items", "open"),
    }
    [note] = report["shadowing"]
    assert (note["served_first"], note["owner"], note["before"], note["before_owner"]) == (
        "GET /x/me",
        "x.Me",
        "GET /x/{id}",
        "x.Items",
    )
    assert report["problems"] == []


def test_a_route_refused_at_boot_is_reported_and_fails_the_command(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root, "domains/x/plugins/again.py", SAME_ROUTE)
    result = keel(root, "routes")
    assert result.returncode == 1, result.stdout + result.stderr
    failures = [line for line in result.stdout.splitlines() if line.startswith("failed at boot: ")]
    assert len(failures) == 1, result.stdout
    assert "(domains/x/plugins/" in failures[0] and "/x/admin" in failures[0], failures[0]
    assert "Traceback" not in result.stdout + result.stderr


def test_a_project_without_the_http_tool_is_told_so(tmp_path: Path) -> None:
    result = keel(make_root(tmp_path, tools=("logger",)), "routes")
    assert result.returncode == 1
    assert result.stderr.strip().endswith("keel routes: this project has no http tool, so it has no routes")


def test_a_file_that_does_not_load_is_reported_beside_the_routes_that_did(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(
        root, "domains/x/plugins/typo.py", "from core import BasePlugin\n\nclass Typo(BasePlugin:\n    pass\n"
    )
    result = keel(root, "routes")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 route(s)" in result.stdout.splitlines()
    failures = [line for line in result.stdout.splitlines() if line.startswith("failed at boot: ")]
    assert len(failures) == 1 and failures[0].startswith("failed at boot: domains/x/plugins/typo.py: "), (
        failures
    )
