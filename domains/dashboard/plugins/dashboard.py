"""The system dashboard: one page at ``/system/`` that shows the running service live, in a browser.

The page, its script and its stylesheet are static files under ``domains/dashboard/static/``,
served through the http tool's ``add_page`` (no build step; nothing is fetched from another host,
so it works offline). Everything the page shows comes from the public system endpoints:
``/system/status``, ``/system/health`` and ``/system/metrics`` (polled), ``/system/logs/stream`` and,
when the event bus is present, ``/system/events/stream`` (read with fetch streaming). This plugin
adds one endpoint of its own, ``GET /system/dashboard/info``: the service's name and version, which
no system endpoint reports.

Choices where the issue left room:

- the page itself is public (a browser's navigation carries no bearer token) and holds nothing
  secret; the data endpoints keep their ``auth="admin"``, and the page asks for a token only when
  one of them answers 401/403. ``/system/dashboard/info`` is admin-only like them;
- the version is the installed ``keel`` distribution's (``pip install -e .`` records the one in
  ``pyproject.toml``), or ``unknown`` when the project runs without being installed;
- a strict ``Content-Security-Policy`` lets the page load scripts, styles and data only from this
  service, so even a log line that carries markup can never run as code.
"""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path
from typing import Any

from core import BasePlugin

STATIC = Path(__file__).resolve().parent.parent / "static"
PAGE_PATH = "/system/"
INFO_PATH = "/system/dashboard/info"

ASSETS: dict[str, tuple[str, str]] = {
    PAGE_PATH: ("index.html", "text/html; charset=utf-8"),
    "/system/dashboard/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/system/dashboard/app.css": ("app.css", "text/css; charset=utf-8"),
}
"""URL path -> (file under ``static/``, media type)."""

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

SERVICE = "keel"


def service_version() -> str:
    """The installed distribution's version, or ``unknown``."""
    try:
        return importlib.metadata.version(SERVICE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class DashboardPlugin(BasePlugin):
    def __init__(self, http: Any) -> None:
        self.http = http

    def on_boot(self) -> None:
        for path, (name, media_type) in ASSETS.items():
            content = (STATIC / name).read_bytes()
            self.http.add_page(path, content, media_type, headers=SECURITY_HEADERS)
        self.http.add_endpoint(INFO_PATH, "GET", self.info, tags=["system"], auth="admin")

    async def info(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The service's name and version, and the Python running it."""
        return {"service": SERVICE, "version": service_version(), "python": platform.python_version()}
