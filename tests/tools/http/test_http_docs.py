"""``/docs`` and ``/redoc``: served with assets from an installed package, under a strict CSP, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import service_unavailable
from tests.domains.dashboard.dashboard_kit import CHROMIUM_FLAGS, chromium_path, require_browser
from tests.kit import until
from tests.tools.http.http_kit import client, make_http, running
from tools.http.docs import static_folder


async def hello(data: dict[str, Any], context: dict[str, Any]) -> dict[str, str]:
    """Say hello."""
    return {"hello": data["name"]}


async def test_the_pages_and_their_assets_come_from_this_service(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/hello/{name}", "GET", hello)
    folder = static_folder()
    assert folder is not None, "fastapi-offline (a dependency) provides the assets"
    async with client(http) as c:
        for page, assets in (
            ("/docs", ["swagger-ui-bundle.js", "swagger-ui.css", "swagger-init.js"]),
            ("/redoc", ["redoc.standalone.js", "redoc-init.js"]),
        ):
            response = await c.get(page)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/html")
            csp = response.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self';" in csp
            assert "<script>" not in response.text, "no inline script: the CSP forbids it"
            assert "http" not in response.text.replace("http-equiv", ""), "nothing from another host"
            for asset in assets:
                assert f"/docs/assets/{asset}" in response.text
                served = await c.get(f"/docs/assets/{asset}")
                assert served.status_code == 200, asset
                if (folder / asset).exists():
                    assert served.content == (folder / asset).read_bytes()
        assert "style-src 'self';" in (await c.get("/docs")).headers["content-security-policy"]
        paths = (await c.get("/openapi.json")).json()["paths"]
    assert list(paths) == ["/hello/{name}"], "the pages are not part of the API"


async def test_swagger_ui_and_redoc_render_with_no_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    executable = require_browser(chromium_path())
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        service_unavailable("the playwright package is not installed (pip install playwright)")
    http = await make_http(monkeypatch, PORT="0")
    http.add_endpoint("/hello/{name}", "GET", hello, tags=["greetings"])
    async with running(http) as (url, _, _), async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = await browser.new_page()
            elsewhere: list[str] = []

            async def offline(route: Any) -> None:
                if route.request.url.startswith(url) or route.request.url.startswith("blob:"):
                    await route.continue_()
                else:
                    elsewhere.append(route.request.url)
                    await route.abort()

            await page.route("**/*", offline)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{url}/docs")

            async def shown(text: str) -> bool:
                return await page.get_by_text(text).count() > 0

            await until(lambda: shown("/hello/{name}"), "Swagger UI lists the operation")
            await page.goto(f"{url}/redoc")
            await until(lambda: shown("Say hello."), "ReDoc shows the operation")
            assert errors == []
            assert [u for u in elsewhere if "redoc" not in u] == []  # ReDoc's footer logo is blocked
        finally:
            await browser.close()
