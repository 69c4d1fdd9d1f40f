"""``add_page``: fixed non-JSON responses (a page and its assets) passed by plugins as plain data."""

from __future__ import annotations

import pytest

from core.context import bound, current_plugin_var
from tests.tools.http.http_kit import client, make_http
from tools.http.page import etag_matches

HTML = "<!doctype html><title>Dashboard</title><p>Grüße</p>"


async def test_a_page_is_served_with_its_media_type_and_exact_body(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_page("/board/", HTML)
    http.add_page("/board/app.js", b"console.log(1);\n", "text/javascript; charset=utf-8")
    async with client(http) as c:
        page = await c.get("/board/")
        script = await c.get("/board/app.js")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.content == HTML.encode("utf-8")
    assert page.headers["content-length"] == str(len(HTML.encode("utf-8")))
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-cache"
    assert page.headers["x-request-id"]
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert script.content == b"console.log(1);\n"


async def test_an_unchanged_page_is_a_304_for_its_etag_and_a_200_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    http.add_page("/p", HTML)
    async with client(http) as c:
        first = await c.get("/p")
        etag = first.headers["etag"]
        again = await c.get("/p", headers={"If-None-Match": etag})
        weak = await c.get("/p", headers={"If-None-Match": f'"other", W/{etag}'})
        stale = await c.get("/p", headers={"If-None-Match": '"not-it"'})
    assert etag.startswith('"') and etag.endswith('"')
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    assert "content-type" not in again.headers
    assert weak.status_code == 304
    assert (stale.status_code, stale.content) == (200, HTML.encode())


async def test_head_answers_the_headers_without_the_body(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_page("/p", HTML)
    async with client(http) as c:
        head = await c.head("/p")
        post = await c.post("/p")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == str(len(HTML.encode()))
    assert post.status_code == 405
    assert post.json()["error"]["kind"] == "method_not_allowed"


async def test_extra_headers_are_sent_but_computed_ones_cannot_be_overridden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    http.add_page("/p", HTML, headers={"Content-Security-Policy": "default-src 'self'"})
    async with client(http) as c:
        response = await c.get("/p")
    assert response.headers["content-security-policy"] == "default-src 'self'"
    for name in ("Content-Type", "etag", "Content-Length", "Cache-Control"):
        with pytest.raises(ValueError, match="computes it"):
            http.add_page("/q", HTML, headers={name: "x"})


@pytest.mark.parametrize(
    ("path", "content", "media_type", "headers", "error"),
    [
        ("p", HTML, "text/html", None, ValueError),
        ("/p", 42, "text/html", None, TypeError),
        ("/p", {"a": 1}, "text/html", None, TypeError),
        ("/p", HTML, "", None, ValueError),
        ("/p", HTML, "text/html\r\nX-Evil: 1", None, ValueError),
        ("/p", HTML, "text/html", {"X-A": "one\ntwo"}, ValueError),
        ("/p", HTML, "text/html", {"X-A": 1}, TypeError),
    ],
)
async def test_malformed_pages_are_refused_at_registration(
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    content: object,
    media_type: str,
    headers: dict[str, object] | None,
    error: type[Exception],
) -> None:
    http = await make_http(monkeypatch)
    with pytest.raises(error):
        http.add_page(path, content, media_type, headers=headers)  # type: ignore[arg-type]
    assert http.get_endpoints() == []


async def test_pages_belong_to_their_plugin_are_replaced_by_it_and_released_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    with bound(current_plugin_var, "board.Page"):
        http.add_page("/p", "one")
        http.add_page("/p", "two")  # a reload replaces the body
    with bound(current_plugin_var, "other.Plugin"), pytest.raises(ValueError, match="board.Page"):
        http.add_page("/p", "three")
    async with client(http) as c:
        assert (await c.get("/p")).text == "two"
        assert http.get_endpoints() == [
            {
                "method": "GET",
                "path": "/p",
                "owner": "board.Page",
                "identity": "page /p",
                "auth": False,
                "tags": [],
                "sse": False,
            }
        ]
        http.release_owner("board.Page")
        gone = await c.get("/p")
    assert gone.status_code == 404
    assert http.get_endpoints() == []


async def test_pages_stay_out_of_the_openapi_document(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_page("/p", HTML)
    http.add_endpoint("/api", "GET", lambda data, context: {"ok": True})
    async with client(http) as c:
        paths = (await c.get("/openapi.json")).json()["paths"]
    assert "/api" in paths
    assert "/p" not in paths


async def test_a_trailing_slash_page_is_reached_from_the_bare_path(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_page("/board/", HTML)
    async with client(http) as c:
        response = await c.get("/board", follow_redirects=True)
    assert response.status_code == 200
    assert str(response.url).endswith("/board/")


@pytest.mark.parametrize(
    ("header", "matches"),
    [('"abc"', True), ('W/"abc"', True), ('"x", "abc"', True), ("*", True), ('"abcd"', False), ("", False)],
)
def test_if_none_match_is_compared_weakly(header: str, matches: bool) -> None:
    assert etag_matches(header, '"abc"') is matches
