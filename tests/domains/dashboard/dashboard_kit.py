"""What the dashboard's tests share: a project root with the dashboard, test plugins, and Debian's
Chromium driven by Playwright.

The browser is the system's ``/usr/bin/chromium`` (``make browser`` installs it; ``make test`` never
does, since that means apt-get as root); the Playwright package only drives it and never downloads
a browser of its own. Where either is missing the browser tests are skipped with the reason and
what to run (:func:`require_browser`), or fail when ``REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import service_unavailable
from tests.kit import PROJECT, make_root, write

ARTIFACTS = PROJECT / "test-artifacts"
WAIT_MS = 15_000  # the bound on any single thing the page is expected to show
RESTART_WAIT_MS = 30_000  # a reconnection waits out the page's backoff (at most 5 s a try)

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""The flags this machine's Chromium needs (its network is closed; it runs as root)."""

SERVICE_ENV = (
    "HOST",
    "PORT",
    "LOG_LEVEL",
    "LOG_STREAM_BACKLOG",
    "LOG_STREAM_CLIENT_QUEUE",
    "SSE_HEARTBEAT_SECONDS",
    "HTTP_ACCESS_LOG",
    "HEALTH_CHECK_INTERVAL",
)

HELLO_PLUGIN = """
    from core import BasePlugin


    class Hello(BasePlugin):
        def __init__(self, http, logger):
            self.http = http
            self.logger = logger

        def on_boot(self):
            self.http.add_endpoint("/hello/{name}", "GET", self.hello, tags=["demo"])
            self.http.add_endpoint("/warn/{name}", "GET", self.warn, tags=["demo"])
            self.http.add_endpoint("/flood/{count:int}", "GET", self.flood, tags=["demo"])

        async def hello(self, data, context):
            self.logger.info("greeting %s", data["name"])
            return {"greeting": f"hello {data['name']}"}

        async def warn(self, data, context):
            self.logger.warning("careful, %s", data["name"])
            return {"warned": data["name"]}

        async def flood(self, data, context):
            # All on the event loop, without yielding: the stream cannot drain meanwhile.
            for n in range(data["count"]):
                self.logger.warning("flood line %d", n)
            return {"logged": data["count"]}
"""

EXPLODING_PLUGIN = """
    from core import BasePlugin


    class Exploding(BasePlugin):
        def on_boot(self):
            raise RuntimeError("the flux capacitor is missing")
"""

SYNTAX_ERROR_FILE = "def oops(:\n    return 1\n"

GATE_PLUGIN = """
    from core import BasePlugin, UnauthorizedError


    class Gate(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.set_auth_validator(self.validate)

        def validate(self, token):
            if token == "admin-secret":
                return {"sub": "ops", "admin": True}
            if token == "reader-token":
                return {"sub": "reader", "roles": ["reader"]}
            raise UnauthorizedError("unknown token")
"""
"""A token check: ``admin-secret`` is an admin, ``reader-token`` a reader without admin rights."""


def chromium_path() -> str | None:
    """Debian's Chromium, when installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


MISSING_BROWSER = "Chromium is not installed; run: make browser"


def require_browser(executable: str | None) -> str:
    """``executable`` (what :func:`chromium_path` found), or skip the test saying how to get the
    browser (fail instead under ``REQUIRE_SERVICES=1``, as CI wants)."""
    if executable is None:
        service_unavailable(MISSING_BROWSER)
        raise AssertionError("unreachable: service_unavailable skips or fails")
    return executable


def dashboard_root(tmp_path: Path, *, name: str = "root") -> Path:
    """A root with the project's http, logger and registry tools, the system and dashboard
    domains, and a ``demo`` plugin whose endpoints log on request."""
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system", "dashboard"), name=name)
    write(root, "domains/demo/plugins/hello.py", HELLO_PLUGIN)
    return root


def add_broken_plugins(root: Path) -> None:
    """A plugin that raises in ``on_boot`` (DEAD) and a file that cannot even be imported."""
    write(root, "domains/broken/plugins/exploding.py", EXPLODING_PLUGIN)
    (root / "domains/broken/plugins/typo.py").write_text(SYNTAX_ERROR_FILE, encoding="utf-8")


class PageWatch:
    """What a page did that a test wants to check afterwards: script errors and requests."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        self.requests: list[Any] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("request", lambda request: self.requests.append(request))

    def urls(self) -> list[str]:
        return [request.url for request in self.requests]
