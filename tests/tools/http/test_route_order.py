"""Routes have owners (``/system/`` is the system domains'), and the most specific path wins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import Registry
from core.context import bound, current_plugin_var
from tests.tools.http.http_kit import client, make_http
from tools.http.route_order import specificity


def answer(name: str) -> Any:
    async def handler(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"handler": name, **data}

    return handler


async def test_another_domain_cannot_register_under_system(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTTP_SYSTEM_DOMAINS", raising=False)
    http = await make_http(monkeypatch)
    with bound(current_plugin_var, "aaa.Impostor"), pytest.raises(ValueError) as raised:
        http.add_endpoint("/system/status", "GET", answer("impostor"))
    assert "belong to the system domains" in str(raised.value) and "aaa.Impostor" in str(raised.value)
    with bound(current_plugin_var, "system.SystemStatusPlugin"):
        http.add_endpoint("/system/status", "GET", answer("system"))
    with bound(current_plugin_var, "dashboard.DashboardPlugin"):
        http.add_endpoint("/system/info", "GET", answer("dashboard"))
    with bound(current_plugin_var, "aaa.Impostor"):
        http.add_endpoint("/systematic", "GET", answer("fine"))  # only the /system/ segment is reserved
    async with client(http) as c:
        assert (await c.get("/system/status")).json()["handler"] == "system"


async def test_a_literal_path_wins_over_a_parameter_registered_before_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    http = await make_http(monkeypatch)
    registry = Registry()
    http.bind(project_root=tmp_path, registry=registry)
    with bound(current_plugin_var, "x.ById"):
        http.add_endpoint("/x/{id}", "GET", answer("by_id"))
        http.add_endpoint("/files/{rest:path}", "GET", answer("files"))
    with bound(current_plugin_var, "x.Me"):
        http.add_endpoint("/x/me", "GET", answer("me"))
        http.add_endpoint("/x/{n:int}", "GET", answer("by_number"))
        http.add_endpoint("/files/readme", "GET", answer("readme"))
    async with client(http) as c:
        assert (await c.get("/x/me")).json()["handler"] == "me"
        assert (await c.get("/x/7")).json()["handler"] == "by_number"
        assert (await c.get("/x/ann")).json() == {"handler": "by_id", "id": "ann"}
        assert (await c.get("/files/readme")).json()["handler"] == "readme"
        assert (await c.get("/files/a/b")).json()["handler"] == "files"
    order = registry.get_system_dump()["kernel"]["capabilities"]["http_route_order"]
    first = {k: v for k, v in order[0].items() if k != "why"}
    assert first == {
        "served_first": "GET /x/me",
        "owner": "x.Me",
        "before": "GET /x/{id}",
        "before_owner": "x.ById",
    }
    pairs = {(note["served_first"], note["before"]) for note in order}
    assert {("GET /x/me", "GET /x/{id}"), ("GET /x/{n:int}", "GET /x/{id}")} <= pairs
    assert ("GET /files/readme", "GET /files/{rest:path}") in pairs


async def test_two_routes_matching_the_same_requests_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    with bound(current_plugin_var, "x.A"):
        http.add_endpoint("/x/{a}", "GET", answer("a"))
        http.add_endpoint("/x/{b}", "POST", answer("post"))  # another method: no clash
    with bound(current_plugin_var, "x.B"), pytest.raises(ValueError, match="could never be served"):
        http.add_endpoint("/x/{b}", "GET", answer("b"))


def test_specificity_orders_literal_typed_plain_path() -> None:
    paths = ["/x/{p:path}", "/x/{id}", "/x/{n:int}", "/x/me", "/x/file.{ext}"]
    assert sorted(paths, key=specificity) == [
        "/x/me",
        "/x/{n:int}",
        "/x/file.{ext}",
        "/x/{id}",
        "/x/{p:path}",
    ]
