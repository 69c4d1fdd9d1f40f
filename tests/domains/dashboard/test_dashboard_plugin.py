"""The dashboard plugin without a browser: what it serves, and that the page needs nothing from
another host."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from tests.domains.dashboard.dashboard_kit import GATE_PLUGIN, dashboard_root
from tests.kit import PROJECT, booted, write

STATIC = PROJECT / "domains" / "dashboard" / "static"
ASSETS = {
    "/system/": ("index.html", "text/html; charset=utf-8"),
    "/system/dashboard/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/system/dashboard/app.css": ("app.css", "text/css; charset=utf-8"),
}


@asynccontextmanager
async def client_for(root: Path) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client for a booted root's whole HTTP stack (no server, no socket)."""
    async with booted(root) as kernel:
        transport = httpx.ASGITransport(app=kernel.container.get("http").asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://keel.test") as client:
            yield client


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(dashboard_root(tmp_path)) as c:
        yield c


@pytest.fixture
async def gated_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    root = dashboard_root(tmp_path)
    write(root, "domains/gate/plugins/gate.py", GATE_PLUGIN)
    async with client_for(root) as c:
        yield c


class References(HTMLParser):
    """Every ``src``/``href`` in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.extend(value for name, value in attrs if name in ("src", "href") and value is not None)


def references(html: str) -> list[str]:
    parser = References()
    parser.feed(html)
    return parser.found


@pytest.mark.parametrize("path", sorted(ASSETS))
async def test_the_page_and_its_assets_are_served_as_they_are_on_disk(
    client: httpx.AsyncClient, path: str
) -> None:
    name, media_type = ASSETS[path]
    response = await client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.content == (STATIC / name).read_bytes()
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_the_bare_system_path_leads_to_the_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/system", follow_redirects=True)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>Keel · System dashboard</title>" in response.text


async def test_every_reference_in_the_page_is_served_by_the_service_itself(client: httpx.AsyncClient) -> None:
    html = (await client.get("/system/")).text
    refs = references(html)
    assert "/system/dashboard/app.js" in refs
    assert "/system/dashboard/app.css" in refs
    for ref in refs:
        if ref.startswith("#") or ref.startswith("data:"):
            continue
        assert ref.startswith("/") and not ref.startswith("//"), ref
        assert (await client.get(ref)).status_code == 200, ref


def test_no_file_of_the_page_names_another_host() -> None:
    """Works offline: no CDN, no font service, no analytics, not even a protocol-relative URL."""
    url = re.compile(r"""(?i)(?:https?:)?//[a-z0-9][a-z0-9.-]*(?::\d+)?(?:/|["'\s)])""")
    css_import = re.compile(r"(?i)@import|url\(\s*['\"]?(?!data:)")
    for path in sorted(STATIC.iterdir()):
        # The SVG namespace is a name that is never fetched; anything else with a host would be.
        text = path.read_text(encoding="utf-8").replace('"http://www.w3.org/2000/svg"', '""')
        assert not url.findall(text), f"{path.name} names another host: {url.findall(text)}"
        if path.suffix == ".css":
            assert not css_import.search(text), f"{path.name} loads another resource"
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    fetched = set(re.findall(r"""(?:getJSON|LiveStream)\(\s*["'`]([^"'`]+)""", script))
    assert fetched == {
        "/system/status",
        "/system/health",
        "/system/metrics?limit=0",
        "/system/dashboard/info",
        "/system/logs/stream",
        "/system/events/stream",
        "/system/metrics/routes",
        "/system/cluster",
        "/agents/runs${query}",
        "/agents/runs/${encodeURIComponent(entry.id)}",
        "/agents/runs/${encodeURIComponent(runs.selected)}",
        "/agents/runs/${encodeURIComponent(runId)}/events",
        "/agents/approvals",  # shown when the agents domain is served
    }


async def test_info_reports_the_service_version(client: httpx.AsyncClient) -> None:
    response = await client.get("/system/dashboard/info")
    assert response.status_code == 200
    body = response.json()
    assert body["service"] == "keel"
    assert body["version"] == importlib.metadata.version("keel")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", body["python"])


async def test_with_a_token_check_installed_the_page_stays_public_and_the_data_needs_an_admin_token(
    gated_client: httpx.AsyncClient,
) -> None:
    page = await gated_client.get("/system/")
    bare = await gated_client.get("/system/dashboard/info")
    wrong = await gated_client.get("/system/dashboard/info", headers={"Authorization": "Bearer nope"})
    right = await gated_client.get("/system/dashboard/info", headers={"Authorization": "Bearer admin-secret"})
    status = await gated_client.get("/system/status")
    assert page.status_code == 200
    assert (bare.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert status.status_code == 401  # what makes the page ask for a token


async def test_the_plugin_is_ready_and_its_page_is_no_api_endpoint(client: httpx.AsyncClient) -> None:
    status = (await client.get("/system/status")).json()
    assert status["plugins"]["dashboard.DashboardPlugin"]["status"] == "READY"
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/system/dashboard/info" in paths
    assert not {"/system/", "/system/dashboard/app.js", "/system/dashboard/app.css"} & set(paths)


def test_the_version_is_unknown_when_the_project_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from domains.dashboard.plugins import dashboard

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    assert dashboard.service_version() == importlib.metadata.version("keel")
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert dashboard.service_version() == "unknown"
