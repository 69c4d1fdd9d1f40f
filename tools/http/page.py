"""Fixed non-JSON responses a plugin registers as plain data: an HTML page, a script, a stylesheet.

``HttpTool.add_page(path, content, media_type)`` serves ``content`` at ``GET path`` (and ``HEAD``)
exactly as given. Plugins may not import the http tool's modules, so everything they pass is plain
data — ``bytes``, or ``str`` sent as UTF-8 — and this module owns the serving:

- the body is fixed when the page is registered; registering the same path again (a plugin that is
  reloaded) replaces it;
- each response carries a strong ``ETag`` (a hash of the body) and ``Cache-Control: no-cache``, so a
  browser revalidates every time and receives a bodiless 304 while the body is unchanged — after a
  reload it never runs a stale script;
- ``X-Content-Type-Options: nosniff`` always; any other headers (a ``Content-Security-Policy``, say)
  come from the plugin, which may not override the ones this module computes;
- pages are public: a browser's navigation carries no bearer token, so a page that needs one asks
  for it and sends it on the API calls it makes.

Pages are not part of the OpenAPI document: they are not an API.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

RESERVED_HEADERS = frozenset({"content-type", "content-length", "etag", "cache-control"})
_BODYLESS_METHODS = frozenset({"HEAD"})


@dataclass(frozen=True)
class Page:
    """One fixed response: its body and every header it is sent with (encoded once)."""

    body: bytes
    etag: str
    headers: tuple[tuple[bytes, bytes], ...]


def build_page(content: bytes | str, media_type: str, headers: Mapping[str, str] | None = None) -> Page:
    """Validate what a plugin passed and prepare the response; ``ValueError``/``TypeError`` if malformed."""
    if isinstance(content, str):
        body = content.encode("utf-8")
    elif isinstance(content, bytes | bytearray | memoryview):
        body = bytes(content)
    else:
        raise TypeError(f"a page's content must be bytes or str, got {type(content).__name__}")
    _check_header_value("media_type", media_type)
    if not media_type.strip():
        raise ValueError("a page needs a media type, e.g. 'text/html; charset=utf-8'")
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    encoded: list[tuple[bytes, bytes]] = [
        (b"content-type", media_type.encode("latin-1")),
        (b"etag", etag.encode("latin-1")),
        (b"cache-control", b"no-cache"),
        (b"x-content-type-options", b"nosniff"),
    ]
    for name, value in (headers or {}).items():
        _check_header_value("header name", name)
        _check_header_value(f"header {name!r}", value)
        lowered = name.lower()
        if lowered in RESERVED_HEADERS:
            raise ValueError(f"a page may not set {name!r}: the http tool computes it")
        encoded = [item for item in encoded if item[0] != lowered.encode("latin-1")]
        encoded.append((lowered.encode("latin-1"), value.encode("latin-1")))
    return Page(body, etag, tuple(encoded))


def _check_header_value(what: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"a page's {what} must be a str, got {type(value).__name__}")
    if any(ch in value for ch in "\r\n\0") or not value.isascii():
        raise ValueError(f"a page's {what} must be one line of ASCII, got {value!r}")


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (weak comparison, as RFC 9110 asks)."""
    candidates = [tag.strip() for tag in if_none_match.split(",")]
    return any(tag == "*" or tag.removeprefix("W/") == etag for tag in candidates)


def make_page_app(page: Page) -> ASGIApp:
    """The ASGI callable serving one page (the route matches only GET and HEAD)."""
    full_headers = [*page.headers, (b"content-length", str(len(page.body)).encode("latin-1"))]
    not_modified_headers = [item for item in page.headers if item[0] != b"content-type"]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if_none_match = next((v for k, v in scope["headers"] if k == b"if-none-match"), None)
        if if_none_match is not None and etag_matches(if_none_match.decode("latin-1"), page.etag):
            await send({"type": "http.response.start", "status": 304, "headers": not_modified_headers})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": full_headers})
        body = b"" if scope["method"] in _BODYLESS_METHODS else page.body
        await send({"type": "http.response.body", "body": body})

    return app
