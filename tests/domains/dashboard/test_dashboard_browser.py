"""The dashboard in a real headless Chromium against a real served kernel.

Every wait is bounded (Playwright's ``expect`` polls the DOM until its timeout); nothing sleeps.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.domains.dashboard.dashboard_kit import (
    ARTIFACTS,
    GATE_PLUGIN,
    RESTART_WAIT_MS,
    WAIT_MS,
    PageWatch,
    add_broken_plugins,
    dashboard_root,
)
from tests.kit import free_port, serving, write

pytestmark = pytest.mark.browser

try:
    from playwright.async_api import expect
except ImportError:  # the browser fixture skips (or fails under REQUIRE_SERVICES) with the reason
    expect = None  # type: ignore[assignment]

# A stand-in for the event bus's trace stream (``domains/system/plugins/event_trace.py``), in its
# wire format: one ``trace`` event per completed record, the record's ``seq`` as the event id.
TRACE_PLUGIN = """
    import asyncio

    from core import BasePlugin

    REQUEST = "req-7f3a9c"
    RECORDS = [
        {"id": "ev-1", "parent_id": REQUEST, "name": "order.placed", "emitter": "shop.Orders.place",
         "timestamp": 1700000000.0, "duration_ms": 4.2, "complete": True, "seq": 1,
         "subscribers": [{"subscriber": "billing.Invoices.on_order", "outcome": "ok",
                          "duration_ms": 3.1, "error": None}]},
        {"id": "ev-2", "parent_id": "ev-1", "name": "invoice.created", "emitter": "billing.Invoices.on_order",
         "timestamp": 1700000000.5, "duration_ms": 1.5, "complete": True, "seq": 2,
         "subscribers": [{"subscriber": "mail.Sender.on_invoice", "outcome": "error",
                          "duration_ms": 0.8, "error": "SMTPError: relay refused"}]},
    ]


    class FakeTrace(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_sse_endpoint("/system/events/stream", self.stream, auth="admin")

        async def stream(self, data, context):
            after = int(context["last_event_id"] or 0)
            for record in RECORDS:
                if record["seq"] > after:
                    yield {"event": "trace", "id": str(record["seq"]), "data": record}
            await asyncio.Event().wait()
"""


async def open_dashboard(browser: Any, base_url: str) -> tuple[Any, PageWatch]:
    page = await browser.new_page()
    watch = PageWatch(page)
    await page.goto(f"{base_url}/system/")
    await expect(page.locator("#log-state")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
    return page, watch


def log_line(page: Any, text: str) -> Any:
    return page.locator("#log-lines .message", has_text=text)


async def test_the_page_loads_with_status_version_uptime_and_metrics(tmp_path: Path, browser: Any) -> None:
    async with serving(dashboard_root(tmp_path)) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            assert (await client.get("/hello/ann")).status_code == 200
        page, watch = await open_dashboard(browser, base_url)

        await expect(page).to_have_title("Keel · System dashboard")
        await expect(page.locator("h1")).to_contain_text("Keel")
        await expect(page.locator("#version")).to_have_text(
            f"keel {importlib.metadata.version('keel')}", timeout=WAIT_MS
        )
        uptime = re.compile(r"^\d+s$|^\d+m \d\ds$")
        await expect(page.locator("#uptime")).to_have_text(uptime, timeout=WAIT_MS)
        await expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        for tool in ("http", "logger", "registry"):
            await expect(page.locator(f'[data-tool="{tool}"]')).to_contain_text("OK")
        system = page.locator('[data-domain="system"]')
        await expect(system.locator('[data-plugin="system.SystemStatusPlugin"]')).to_contain_text("READY")
        await expect(page.locator('[data-plugin="demo.Hello"]')).to_contain_text("uses http, logger")
        # The polls themselves are registry calls, so the metrics table always has rows.
        metric = page.locator('[data-metric="registry.get_system_dump"]')
        await expect(metric).to_be_visible(timeout=WAIT_MS)
        await expect(metric.locator("td").nth(1)).to_have_text("0")
        await expect(page.locator('[data-metric="logger.info"] td').first).not_to_have_text("0")
        await expect(page.locator("#events-panel")).to_be_hidden()  # no event bus in this root

        assert watch.errors == []
        elsewhere = [url for url in watch.urls() if not url.startswith((f"{base_url}/", "data:"))]
        assert elsewhere == []


async def test_a_dead_plugin_and_a_file_that_failed_to_import_are_shown_with_their_errors(
    tmp_path: Path, browser: Any
) -> None:
    root = dashboard_root(tmp_path)
    add_broken_plugins(root)
    async with serving(root) as (kernel, base_url):
        page, watch = await open_dashboard(browser, base_url)
        broken = page.locator('[data-domain="broken"]')
        dead = broken.locator('[data-plugin="broken.Exploding"]')
        await expect(dead).to_contain_text("DEAD", timeout=WAIT_MS)
        await expect(dead.locator("pre.error")).to_contain_text(
            "on_boot() raised RuntimeError: the flux capacitor is missing"
        )
        typo = broken.locator('[data-load-error="domains/broken/plugins/typo.py"]')
        await expect(typo).to_contain_text("LOAD ERROR")
        await expect(typo.locator("pre.error")).to_contain_text("SyntaxError")
        summary = page.locator("#summary")
        await expect(summary).to_contain_text("1 DEAD")
        await expect(summary).to_contain_text("files failed to import")
        assert watch.errors == []


async def test_a_log_line_from_a_request_appears_and_the_level_filter_and_pause_work(
    tmp_path: Path, browser: Any
) -> None:
    async with serving(dashboard_root(tmp_path)) as (kernel, base_url):
        page, watch = await open_dashboard(browser, base_url)
        async with httpx.AsyncClient(base_url=base_url) as client:
            await client.get("/hello/ann")
            await expect(log_line(page, "greeting ann")).to_be_visible(timeout=WAIT_MS)
            row = page.locator("#log-lines li", has_text="greeting ann")
            await expect(row.locator(".level")).to_have_text("INFO")
            await expect(row.locator(".identity")).to_have_text("demo.Hello.hello")

            await page.select_option("#log-level", label="WARNING and above")
            await expect(log_line(page, "greeting ann")).to_have_count(0)
            await client.get("/warn/bob")
            await expect(log_line(page, "careful, bob")).to_be_visible(timeout=WAIT_MS)

            pause = page.locator("#log-pause")
            await pause.focus()
            await page.keyboard.press("Enter")  # a real button: the keyboard works it
            await expect(pause).to_have_attribute("aria-pressed", "true")
            await client.get("/warn/cy")
            await expect(page.locator("#log-state")).to_have_text("Paused · 1 new line held", timeout=WAIT_MS)
            await expect(log_line(page, "careful, cy")).to_have_count(0)
            await page.keyboard.press("Space")
            await expect(pause).to_have_attribute("aria-pressed", "false")
            await expect(log_line(page, "careful, cy")).to_be_visible(timeout=WAIT_MS)

            await page.select_option("#log-level", label="All levels")
            await expect(log_line(page, "greeting ann")).to_be_visible()
        assert watch.errors == []


PARSER_CASE = r"""() => {
    const events = [];
    const retries = [];
    const { EventStreamParser } = window.keelDashboard;
    const parser = new EventStreamParser((e) => events.push(e), (ms) => retries.push(ms));
    for (const chunk of [
        "data: one\r", "\n\r\n",                       // CRLF, split between chunks
        ": keep-alive\n\n",                              // a comment dispatches nothing
        'id: 7\nevent: dropped\ndata: {"dropped": 3}\n\n',
        "data: a\ndata: b\n\n",                          // two data lines are one event
        "retry: 1500\n",
        "data:no-space\r", "\ndata: q\n", "\n",          // CR then LF in the next chunk: one break
    ]) parser.push(chunk);
    return { events, retries };
}"""


async def test_the_stream_parser_follows_the_event_stream_format(tmp_path: Path, browser: Any) -> None:
    async with serving(dashboard_root(tmp_path)) as (kernel, base_url):
        page, watch = await open_dashboard(browser, base_url)
        result = await page.evaluate(PARSER_CASE)
    assert result == {
        "events": [
            {"type": "message", "data": "one", "id": None},
            {"type": "dropped", "data": '{"dropped": 3}', "id": "7"},
            {"type": "message", "data": "a\nb", "id": None},
            {"type": "message", "data": "no-space\nq", "id": None},
        ],
        "retries": [1500],
    }
    assert watch.errors == []


async def test_lines_the_server_dropped_for_the_page_are_counted(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOG_STREAM_CLIENT_QUEUE", "5")
    monkeypatch.setenv("LOG_LEVEL", "WARNING")  # only the flood reaches the stream meanwhile
    async with serving(dashboard_root(tmp_path)) as (kernel, base_url):
        page, watch = await open_dashboard(browser, base_url)
        await expect(page.locator("#log-dropped")).to_have_text("0")
        async with httpx.AsyncClient(base_url=base_url) as client:
            assert (await client.get("/flood/60")).json() == {"logged": 60}
        # 60 lines logged without the stream getting a turn: 5 fit the page's queue, 55 are dropped.
        await expect(page.locator("#log-dropped")).to_have_text("55", timeout=WAIT_MS)
        await expect(log_line(page, "flood line 4")).to_be_visible()
        await expect(log_line(page, "flood line 5")).to_have_count(0)
        assert watch.errors == []


async def test_the_page_reconnects_by_itself_after_the_service_restarts(tmp_path: Path, browser: Any) -> None:
    root = dashboard_root(tmp_path)
    port = free_port()
    async with serving(root, port=port) as (kernel, base_url):
        page, watch = await open_dashboard(browser, base_url)
        async with httpx.AsyncClient(base_url=base_url) as client:
            await client.get("/hello/before")
        await expect(log_line(page, "greeting before")).to_be_visible(timeout=WAIT_MS)

    log_state = page.locator("#log-state")
    await expect(log_state).to_have_attribute("data-state", "reconnecting", timeout=WAIT_MS)
    await expect(page.locator("#connection")).to_have_attribute("data-state", "down", timeout=WAIT_MS)

    async with serving(root, port=port) as (kernel, base_url):
        await expect(log_state).to_have_attribute("data-state", "live", timeout=RESTART_WAIT_MS)
        async with httpx.AsyncClient(base_url=base_url) as client:
            await client.get("/hello/after")
        await expect(log_line(page, "greeting after")).to_be_visible(timeout=WAIT_MS)
        await expect(log_line(page, "greeting before")).to_be_visible()  # the tail survived
        await expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
    assert watch.errors == []


async def test_the_page_asks_for_an_admin_token_and_sends_it_only_as_a_header(
    tmp_path: Path, browser: Any
) -> None:
    root = dashboard_root(tmp_path)
    write(root, "domains/gate/plugins/gate.py", GATE_PLUGIN)
    async with serving(root) as (kernel, base_url):
        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        token_input = page.locator("#token-input")
        await expect(token_input).to_be_visible(timeout=WAIT_MS)
        await expect(token_input).to_be_focused()
        await expect(page.locator("#dashboard")).to_be_hidden()

        await token_input.fill("reader-token")
        await page.keyboard.press("Enter")
        await expect(page.locator("#auth-message")).to_contain_text("not an admin's", timeout=WAIT_MS)

        await token_input.fill("admin-secret")
        await page.get_by_role("button", name="Use token").click()
        await expect(page.locator("#dashboard")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator('[data-tool="http"]')).to_contain_text("OK", timeout=WAIT_MS)
        await expect(page.locator("#log-state")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        async with httpx.AsyncClient(base_url=base_url) as client:
            await client.get("/hello/ann")
        await expect(log_line(page, "greeting ann")).to_be_visible(timeout=WAIT_MS)
        assert await page.evaluate("sessionStorage.getItem('keel.dashboard.token')") == "admin-secret"

        await page.get_by_role("button", name="Forget token").click()
        await expect(token_input).to_be_visible(timeout=WAIT_MS)

        assert not [url for url in watch.urls() if "secret" in url or "token" in url]
        sent = [await r.all_headers() for r in watch.requests if r.url.endswith("/system/logs/stream")]
        assert {"Bearer admin-secret"} <= {headers.get("authorization") for headers in sent}
        assert watch.errors == []


async def test_a_tour_with_event_chains_and_a_screenshot(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every panel with something in it; the screenshot is saved under test-artifacts/."""
    monkeypatch.setenv("HTTP_SYSTEM_DOMAINS", "system,dashboard,trace")  # the stand-in trace serves /system/
    root = dashboard_root(tmp_path)
    add_broken_plugins(root)
    write(root, "domains/trace/plugins/fake_trace.py", TRACE_PLUGIN)
    async with serving(root) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            for name in ("ann", "bob", "cy"):
                await client.get(f"/hello/{name}")
            await client.get("/warn/dan")
        page, watch = await open_dashboard(browser, base_url)
        panel = page.locator("#events-panel")
        await expect(panel).to_be_visible(timeout=WAIT_MS)
        chain = panel.locator('[data-chain="req-7f3a9c"]')
        await expect(chain.locator("summary")).to_contain_text("2 events", timeout=WAIT_MS)
        await expect(chain.locator("summary")).to_contain_text("ERROR")
        await chain.locator("summary").focus()
        await page.keyboard.press("Enter")
        await expect(chain).to_contain_text("SMTPError: relay refused")
        await expect(chain).to_contain_text("invoice.created")
        await expect(log_line(page, "careful, dan")).to_be_visible(timeout=WAIT_MS)
        dead = page.locator('[data-plugin="broken.Exploding"]')
        await expect(dead).to_contain_text("DEAD", timeout=WAIT_MS)

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        await page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        assert watch.errors == []


async def test_the_page_signs_in_with_an_admin_username_and_password(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from domains.users.commands import create_user
    from tests.kit import PROJECT, make_root

    for name in ("AUTH_ALGORITHM", "AUTH_ISSUER", "AUTH_AUDIENCE", "DATABASE_URL", "KEEL_ADMIN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTH_SECRET_KEY", "dashboard-login-secret-" + "x" * 32)
    monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", "4")
    monkeypatch.setenv("AUTH_SCRYPT_P", "1")
    root = make_root(
        tmp_path,
        tools=("http", "logger", "system", "auth", "db"),
        domains=("system", "dashboard", "users", "auth_wiring"),
    )
    (root / "migrations").mkdir()
    (root / "migrations" / "users").symlink_to(PROJECT / "migrations" / "users", target_is_directory=True)
    await create_user("root", "correct-horse-battery", admin=True, root=root)
    await create_user("ann", "correct-horse-battery", root=root)
    async with serving(root) as (kernel, base_url):
        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        await expect(page.locator("#login-username")).to_be_visible(timeout=WAIT_MS)

        await page.locator("#login-username").fill("root")
        await page.locator("#login-password").fill("wrong-password")
        await page.get_by_role("button", name="Sign in with password").click()
        await expect(page.locator("#login-error")).to_contain_text("invalid username", timeout=WAIT_MS)

        await page.locator("#login-username").fill("ann")
        await page.locator("#login-password").fill("correct-horse-battery")
        await page.get_by_role("button", name="Sign in with password").click()
        await expect(page.locator("#auth-message")).to_contain_text("not an admin's", timeout=WAIT_MS)

        await page.locator("#login-username").fill("root")
        await page.locator("#login-password").fill("correct-horse-battery")
        await page.get_by_role("button", name="Sign in with password").click()
        await expect(page.locator("#dashboard")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator('[data-tool="auth"]')).to_contain_text("OK", timeout=WAIT_MS)
        assert not [url for url in watch.urls() if "password" in url]


async def test_the_page_lists_agent_runs_waiting_for_approval(
    tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.domains.agents.agents_kit import agents_root, wait_for_status
    from tests.domains.agents.test_approval import PAY, PAYMENTS_PLUGIN

    monkeypatch.setenv("FAKE_LLM_SCRIPT", PAY)
    monkeypatch.setenv("SENT_LOG", str(tmp_path / "sent.log"))
    root = agents_root(
        tmp_path,
        tools=("http", "db", "checkpoint", "store", "logger", "system"),
        domains=("system", "dashboard"),
        example=False,
        plugins={"payments.py": PAYMENTS_PLUGIN},
    )
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        page = await browser.new_page()
        watch = PageWatch(page)
        await page.goto(f"{base_url}/system/")
        await expect(page.locator('[data-tool="http"]')).to_contain_text("OK", timeout=WAIT_MS)
        await expect(page.locator("#approvals-panel")).to_be_hidden()
        run_id = (await client.post("/agents/payments/runs", json={"input": "pay ada"})).json()["id"]
        await wait_for_status(client, run_id, ["suspended"])
        waiting = page.locator(f'#approvals [data-run="{run_id}"]')
        await expect(waiting).to_contain_text("pay 500 euros to ada?", timeout=WAIT_MS)
        await expect(waiting).to_contain_text('pay({"to":"ada","amount":500})')
        await client.post(f"/agents/runs/{run_id}/approval", json={"approve": False})
        await expect(page.locator("#approvals-panel")).to_be_hidden(timeout=WAIT_MS)
        assert watch.errors == []
