"""The dashboard's views in a real Chromium: a phone and a desktop, log search and request links,
the password login, the disconnected state, and an agent run followed live to its end.

Screenshots of each size are saved under ``test-artifacts/``. Every wait is bounded (Playwright's
``expect`` polls the DOM until its timeout); nothing sleeps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RedisNamespace
from tests.domains.agents.agents_kit import agents_root, call
from tests.domains.dashboard.dashboard_kit import (
    ARTIFACTS,
    WAIT_MS,
    PageWatch,
    add_broken_plugins,
    dashboard_root,
)
from tests.kit import PROJECT, make_root, serving, write
from tests.scale.cluster import KeelProcess

pytestmark = pytest.mark.browser

try:
    from playwright.async_api import expect
except ImportError:  # the browser fixture skips (or fails under REQUIRE_SERVICES) with the reason
    expect = None  # type: ignore[assignment]

SIZES = {"desktop": (1440, 900), "phone": (390, 844)}

LONG_FAILURE_PLUGIN = """
    from core import BasePlugin


    class Unconfigured(BasePlugin):
        def on_boot(self):
            raise RuntimeError(
                "set PAYMENTS_PROVIDER_ENDPOINT_URL_FOR_THE_PRODUCTION_ENVIRONMENT_OF_THIS_SERVICE to the "
                "provider's https://payments.example.invalid/api/v2/merchants/00000000-0000-0000-0000-0000000000"
                "/endpoints before booting this plugin"
            )
"""

OVERFLOW_CHECK = """() => {
    const width = document.documentElement.clientWidth;
    const wide = [];
    for (const node of document.querySelectorAll("body *")) {
        if (node.closest(".table-wrap, .log-view, pre, .visually-hidden, [hidden]")) continue;
        const box = node.getBoundingClientRect();
        if (box.width && box.right > width + 1) wide.push(`${node.tagName}.${node.className}`);
    }
    return { page: document.documentElement.scrollWidth - width, wide: wide.slice(0, 10) };
}"""
"""How far the page is wider than the window, and the elements that stick out of it (the log view
and table wrappers scroll on purpose and are left out, as are their contents)."""

TABLE_WRAPS_FIT = """() => [...document.querySelectorAll(".table-wrap")]
    .filter((wrap) => wrap.offsetParent !== null && wrap.scrollWidth > wrap.clientWidth + 1)
    .map((wrap) => wrap.parentElement.id)"""


async def page_of_size(browser: Any, size: str) -> Any:
    width, height = SIZES[size]
    page = await browser.new_page()
    await page.set_viewport_size({"width": width, "height": height})
    return page


def log_line(page: Any, text: str) -> Any:
    return page.locator("#log-lines .message", has_text=text)


@pytest.mark.parametrize("size", sorted(SIZES))
async def test_nothing_overflows_on_a_phone_or_a_desktop(tmp_path: Path, browser: Any, size: str) -> None:
    root = dashboard_root(tmp_path)
    add_broken_plugins(root)
    write(root, "domains/broken/plugins/unconfigured.py", LONG_FAILURE_PLUGIN)
    async with serving(root) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            await client.get("/hello/" + "a-very-long-name-without-spaces" * 4)
            await client.get("/warn/dan")
        page = await page_of_size(browser, size)
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        await expect(page.locator("#log-state")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        await expect(page.locator('[data-plugin="broken.Unconfigured"]')).to_contain_text(
            "DEAD", timeout=WAIT_MS
        )
        await expect(log_line(page, "careful, dan")).to_be_visible(timeout=WAIT_MS)
        route = page.locator('#routes-table [data-route="GET /warn/{name}"]')
        await expect(route).to_contain_text("200: 1", timeout=WAIT_MS)
        await expect(route.locator("svg.sparkline polyline")).to_have_count(1)

        overflow = await page.evaluate(OVERFLOW_CHECK)
        assert overflow == {"page": 0, "wide": []}
        assert await page.evaluate(TABLE_WRAPS_FIT) == []  # tables fit (on a phone they are lists)
        row = page.locator("#log-lines li", has_text="careful, dan")
        box = await row.bounding_box()
        assert box is not None and box["height"] < 120  # a log line is a line or two, not a column

        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / f"dashboard-{size}.png"), full_page=True)
        assert watch.errors == []


EVENTFUL_PLUGIN = """
    from core import BasePlugin


    class Greeter(BasePlugin):
        def __init__(self, http, logger, event_bus):
            self.http = http
            self.logger = logger
            self.event_bus = event_bus

        async def on_boot(self):
            self.http.add_endpoint("/greet/{name}", "GET", self.greet)
            await self.event_bus.subscribe("greeted", self.on_greeted)

        async def greet(self, data, context):
            self.logger.info("greeting %s", data["name"])
            await self.event_bus.publish("greeted", {"name": data["name"]})
            return {"request_id": context["request_id"]}

        async def on_greeted(self, event):
            self.logger.info("sent a card to %s", event.payload["name"])
"""


async def test_search_and_source_filters_and_a_request_link_to_its_event_chain(
    tmp_path: Path, browser: Any
) -> None:
    root = make_root(
        tmp_path, tools=("http", "logger", "system", "event_bus"), domains=("system", "dashboard")
    )
    write(root, "domains/demo/plugins/greeter.py", EVENTFUL_PLUGIN)
    async with serving(root) as (kernel, base_url):
        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        await expect(page.locator("#log-state")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        async with httpx.AsyncClient(base_url=base_url) as client:
            ann = (await client.get("/greet/ann")).json()["request_id"]
            await client.get("/greet/bob")
        await expect(log_line(page, "sent a card to bob")).to_be_visible(timeout=WAIT_MS)

        await page.fill("#log-search", "CARD TO")  # case does not matter
        await expect(log_line(page, "sent a card to ann")).to_be_visible(timeout=WAIT_MS)
        await expect(log_line(page, "greeting ann")).to_have_count(0)
        await expect(page.locator("#log-lines mark").first).to_have_text("card to")
        await page.fill("#log-search", "")
        await expect(log_line(page, "greeting ann")).to_be_visible(timeout=WAIT_MS)

        await page.select_option("#log-source", "demo.Greeter.greet")
        await expect(log_line(page, "greeting bob")).to_be_visible()
        await expect(log_line(page, "sent a card")).to_have_count(0)
        await page.select_option("#log-source", "")

        line = page.locator("#log-lines li", has_text="greeting ann")
        await line.locator("button[data-request]").click()
        await expect(page.locator("#log-request-filter")).to_be_visible()
        await expect(log_line(page, "greeting bob")).to_have_count(0)
        await expect(log_line(page, "greeting ann")).to_be_visible()
        chain = page.locator(f'#chains [data-chain="{ann}"]')
        await expect(chain).to_have_class("chain selected", timeout=WAIT_MS)
        await expect(chain.locator("summary .name")).to_have_text("greeted")  # named, even collapsed
        await expect(page.locator("#chains .chain")).to_have_count(1)
        await page.get_by_role("button", name="Show every line").click()
        await expect(log_line(page, "greeting bob")).to_be_visible()
        assert watch.errors == []


async def test_the_password_form_gets_a_token_for_an_admin(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTH_SECRET_KEY", "dashboard-test-secret-" + "x" * 32)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'users.db'}")
    root = make_root(
        tmp_path,
        tools=("http", "logger", "system", "db", "auth"),
        domains=("system", "dashboard", "users", "auth_wiring"),
    )
    (root / "migrations").mkdir()
    (root / "migrations" / "users").symlink_to(PROJECT / "migrations" / "users", target_is_directory=True)
    async with serving(root) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            registered = await client.post("/users/register", json={"username": "ops", "password": "p" * 12})
            assert registered.status_code == 201, registered.text
        db = kernel.container.get("db")
        await db.execute("UPDATE users SET roles = $1 WHERE username = $2", ["admin user", "ops"])

        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        await expect(page.locator("#login-username")).to_be_visible(timeout=WAIT_MS)
        await page.fill("#login-username", "ops")
        await page.fill("#login-password", "wrong password!")
        await page.get_by_role("button", name="Sign in with password").click()
        await expect(page.locator("#login-error")).to_be_visible(timeout=WAIT_MS)

        await page.fill("#login-password", "p" * 12)
        await page.get_by_role("button", name="Sign in with password").click()
        await expect(page.locator("#dashboard")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator('[data-tool="auth"]')).to_contain_text("OK", timeout=WAIT_MS)
        token = await page.evaluate("sessionStorage.getItem('keel.dashboard.token')")
        assert token and token.count(".") == 2  # a JWT, kept for this tab
        assert not [url for url in watch.urls() if token in url or "password" in url]
        assert watch.errors == []


async def test_a_lost_service_is_shown_as_disconnected_not_healthy(tmp_path: Path, browser: Any) -> None:
    async with serving(dashboard_root(tmp_path)) as (kernel, base_url):
        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        health = page.locator('[data-summary="Health"] .summary-value')
        await expect(health).to_have_text("Healthy", timeout=WAIT_MS)
    await expect(page.locator("#disconnected")).to_contain_text("Disconnected since", timeout=WAIT_MS)
    await expect(health).to_have_text("Disconnected")
    await expect(page.locator('[data-summary="Health"]')).to_have_class("summary-item tone-good stale")
    assert watch.errors == []


async def test_an_agent_run_is_listed_and_followed_live_to_its_end(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'agents.db'}")
    monkeypatch.setenv(
        "FAKE_LLM_SCRIPT",
        json.dumps(
            [
                {"tool_calls": [call("c1", "find_products", query="walnut")]},
                {
                    "content": "The walnut keyboard is in stock.",
                    "usage": {"input_tokens": 30, "output_tokens": 9},
                },
            ]
        ),
    )
    root = agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "logger", "system"),
        domains=("system", "dashboard"),
    )
    async with serving(root) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            started = await client.post(
                "/agents/products/runs", json={"input": "Is the walnut keyboard in stock?"}
            )
            assert started.status_code == 202, started.text
            run_id = started.json()["id"]
        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        row = page.locator(f'#runs-table [data-run="{run_id}"]')
        await expect(row).to_contain_text("products", timeout=WAIT_MS)
        await row.get_by_role("button").click()
        detail = page.locator("#run-detail")
        await expect(detail.locator('[data-kind="final"]')).to_be_visible(timeout=WAIT_MS)
        await expect(detail.locator('[data-kind="tool_call"]')).to_contain_text("find_products")
        await expect(detail.locator("#run-facts")).to_contain_text("COMPLETED", timeout=WAIT_MS)
        async with httpx.AsyncClient(base_url=base_url) as client:
            view = (await client.get(f"/agents/runs/{run_id}")).json()
        assert view["usage"]["total_tokens"] >= 39  # the last turn's 30 + 9, and the first turn's
        tokens = detail.locator("#run-facts div", has_text="Tokens")
        await expect(tokens.locator("dd")).to_have_text(f"{view['usage']['total_tokens']:,}")
        await expect(detail.locator("#run-facts div", has_text="Cost").locator("dd")).to_have_text(
            f"${view['cost_usd']}"
        )
        await expect(detail.locator("#run-output")).to_contain_text("walnut keyboard is in stock")
        await expect(row).to_contain_text("COMPLETED", timeout=WAIT_MS)
        assert watch.errors == []


@pytest.mark.services
async def test_the_cluster_view_lists_two_real_processes_and_a_version_mismatch(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch, redis_namespace: RedisNamespace
) -> None:
    for name in ("EVENT_BUS_URL", "STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLUSTER_URL", redis_namespace.url)
    monkeypatch.setenv("CLUSTER_PREFIX", redis_namespace.prefix)
    monkeypatch.setenv("CLUSTER_HEARTBEAT_SECONDS", "0.5")
    roots = []
    for name, version in (("one", "1"), ("two", "2")):
        root = dashboard_root(tmp_path, name=name)
        (root / "tools" / "cluster").symlink_to(PROJECT / "tools" / "cluster", target_is_directory=True)
        write(
            root,
            "domains/demo/plugins/hello.py",
            (root / "domains/demo/plugins/hello.py").read_text() + f"\n# version {version}\n",
        )
        roots.append(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PORT", "HOST", "AUTH_"))}
    other = KeelProcess("two", roots[1], {**env, "PORT": "0", "HOST": "127.0.0.1", "LOG_LEVEL": "INFO"})
    other.start()
    try:
        other.wait_serving()
        async with serving(roots[0]) as (kernel, base_url):
            page = await browser.new_page()
            watch = PageWatch(page)
            await page.goto(f"{base_url}/system/")
            panel = page.locator("#cluster-panel")
            await expect(panel.locator("tbody tr")).to_have_count(2, timeout=WAIT_MS)
            await expect(panel.locator(f'[data-process*=":{other.pid}:"]')).to_be_visible()
            await expect(panel.locator(f'[data-process*=":{os.getpid()}:"]')).to_contain_text(
                "this page's process"
            )
            mismatch = panel.locator('[data-mismatch="domains/demo/plugins/hello.py"]')
            await expect(mismatch).to_be_visible(timeout=WAIT_MS)
            await expect(panel.locator("#cluster-mismatches")).to_contain_text(
                "1 plugin file differs between processes"
            )
            ARTIFACTS.mkdir(exist_ok=True)
            await panel.screenshot(path=str(ARTIFACTS / "dashboard-cluster.png"))
            assert watch.errors == []
    finally:
        assert other.stop() == 0, other.output()
