"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served by Keel with no network at all.

FastAPI's own pages load their scripts and styles from a CDN, so offline they are blank. These load
them from ``/docs/assets/``, files of the ``fastapi-offline`` package (a dependency in
``pyproject.toml``: only its bundled static files are used). The pages carry the dashboard's
``Content-Security-Policy`` — scripts, styles and data from this service only, no inline script —
so the start-up code is a script file too. ``/redoc`` alone also allows inline styles (ReDoc
inserts ``<style>`` elements; without them it shows an error), never inline scripts.
Assets are read on their first request, not at import.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .page import Page, build_page, make_page_app

ASSETS_PATH = "/docs/assets"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "worker-src 'self' blob:",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Referrer-Policy": "no-referrer"}
REDOC_SECURITY_HEADERS = {
    **SECURITY_HEADERS,
    # ReDoc styles itself with styled-components, which inserts <style> elements: the one departure
    # from the dashboard's policy. Scripts stay 'self' only.
    "Content-Security-Policy": CONTENT_SECURITY_POLICY.replace(
        "style-src 'self'", "style-src 'self' 'unsafe-inline'"
    ),
}

SWAGGER_HTML = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Keel - API docs</title>
<link rel="icon" href="{ASSETS_PATH}/favicon.png">
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="{ASSETS_PATH}/swagger-init.js"></script>
</body>
</html>
"""

SWAGGER_INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  persistAuthorization: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""

REDOC_HTML = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Keel - API reference</title>
<link rel="icon" href="{ASSETS_PATH}/favicon.png">
</head>
<body>
<div id="redoc"></div>
<script src="{ASSETS_PATH}/redoc.standalone.js"></script>
<script src="{ASSETS_PATH}/redoc-init.js"></script>
</body>
</html>
"""

REDOC_INIT = """Redoc.init("/openapi.json", {}, document.getElementById("redoc"));
"""

_JS = "text/javascript; charset=utf-8"
_HTML = "text/html; charset=utf-8"


def static_folder() -> Path | None:
    """The ``fastapi_offline`` package's ``static`` folder, or ``None`` when it is not installed."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    return folder if folder.is_dir() else None


def _files() -> dict[str, tuple[str | Path, str]]:
    """URL path -> (inline content, or a file of the package; media type)."""
    return {
        "/docs": (SWAGGER_HTML, _HTML),
        "/redoc": (REDOC_HTML, _HTML),
        f"{ASSETS_PATH}/swagger-init.js": (SWAGGER_INIT, _JS),
        f"{ASSETS_PATH}/redoc-init.js": (REDOC_INIT, _JS),
        f"{ASSETS_PATH}/swagger-ui-bundle.js": (Path("swagger-ui-bundle.js"), _JS),
        f"{ASSETS_PATH}/swagger-ui.css": (Path("swagger-ui.css"), "text/css; charset=utf-8"),
        f"{ASSETS_PATH}/redoc.standalone.js": (Path("redoc.standalone.js"), _JS),
        f"{ASSETS_PATH}/favicon.png": (Path("favicon.png"), "image/png"),
    }


class _LazyPage:
    """An ASGI app building its page on the first request (a class: Starlette serves it as ASGI)."""

    def __init__(self, content: str | Path, media_type: str, headers: dict[str, str]) -> None:
        self.content = content
        self.media_type = media_type
        self.headers = headers
        self._app: ASGIApp | None = None

    def _build(self) -> ASGIApp:
        content = self.content
        if isinstance(content, Path):
            folder = static_folder()
            if folder is None:
                raise RuntimeError("the fastapi-offline package (the docs' assets) is not installed")
            body: bytes | str = (folder / content).read_bytes()
        else:
            body = content
        page: Page = build_page(body, self.media_type, self.headers)
        return make_page_app(page)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._app = self._build()
        await self._app(scope, receive, send)


def docs_routes() -> list[Route]:
    return [
        Route(
            path,
            _LazyPage(content, media_type, REDOC_SECURITY_HEADERS if path == "/redoc" else SECURITY_HEADERS),
            methods=["GET", "HEAD"],
            include_in_schema=False,
        )
        for path, (content, media_type) in _files().items()
    ]
