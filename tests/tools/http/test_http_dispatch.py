"""The dispatcher's fast path answers exactly what FastAPI's stack answers, message for message.

Two http tools get the same endpoints: one as shipped (``RequestIdMiddleware`` -> ``Dispatcher`` ->
FastAPI) and one wired as before the dispatcher existed (``RequestIdMiddleware`` -> FastAPI, the
server spans inside FastAPI's middleware). Every request is sent to both with the same
``X-Request-ID``, and the ASGI messages they send back (status, every header in order, body bytes)
must be equal. A spy on FastAPI's middleware stack says which requests the fast path served.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from core.errors import NotFoundError, UnauthorizedError
from tests.tools.http.http_kit import make_http
from tools.http.http_tool import HttpTool
from tools.http.request_id import RequestIdMiddleware
from tools.http.server_spans import ServerSpans


class Thing(BaseModel):
    name: str
    size: int = 1


class Public(BaseModel):
    name: str


class Failing(Response):
    """A response whose sending fails before it starts: the exception escapes the endpoint."""

    def __init__(self, error: Exception) -> None:
        super().__init__(b"")
        self.error = error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise self.error


def validator(token: str) -> dict[str, Any]:
    if token == "admin-token":
        return {"sub": "root", "admin": True}
    if token == "user-token":
        return {"sub": "ann"}
    raise UnauthorizedError("unknown token")


def register(http: HttpTool) -> None:
    async def item(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        if data.get("item_id") == 404:
            raise NotFoundError("no item 404")
        return {"data": data, "query": context["query"], "identity": context["identity"]}

    async def create(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"created": data, "model": type(context["model"]).__name__}

    def whoami(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"identity": context["identity"]}

    async def boom(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise RuntimeError("handler failed")

    async def nothing(data: dict[str, Any], context: dict[str, Any]) -> None:
        return None

    async def filtered(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"name": "kept", "secret": "dropped"}

    async def escapes(data: dict[str, Any], context: dict[str, Any]) -> Response:
        kind = data.get("kind")
        if kind == "http":
            return Failing(HTTPException(409, "taken"))
        if kind == "plain":
            return http.json_response({"plain": True}, status_code=202, headers={"X-Extra": "1"})
        return Failing(RuntimeError("the response could not be sent"))

    http.add_endpoint("/items/{item_id:int}", "GET", item, tags=["items"])
    http.add_endpoint("/items/me", "GET", item)
    http.add_endpoint("/things", "POST", create, request_model=Thing, status_code=201)
    http.add_endpoint("/whoami", "GET", whoami, auth=True)
    http.add_endpoint("/admin", "GET", whoami, auth="admin")
    http.add_endpoint("/maybe", "GET", whoami, auth="optional")
    http.add_endpoint("/boom", "GET", boom)
    http.add_endpoint("/nothing", "DELETE", nothing)
    http.add_endpoint("/filtered", "GET", filtered, response_model=Public)
    http.add_endpoint("/escapes", "GET", escapes)
    http.add_page("/page", "<p>hi</p>")
    http.set_auth_validator(validator)


class Counting:
    """Wraps FastAPI's middleware stack: how many requests reached FastAPI."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        await self.app(scope, receive, send)


async def pair(monkeypatch: pytest.MonkeyPatch) -> tuple[HttpTool, HttpTool, Counting]:
    fast = await make_http(monkeypatch)
    plain = await make_http(monkeypatch)
    for http in (fast, plain):
        register(http)
    plain.asgi = RequestIdMiddleware(plain.app)  # the stack before the dispatcher
    spy = Counting(fast.app.build_middleware_stack())
    fast.app.middleware_stack = spy
    return fast, plain, spy


async def call(
    app: Any, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes = b""
) -> list[dict[str, Any]]:
    """The ASGI messages ``app`` sends for one request (the id is fixed so both tools agree)."""
    target, _, query = path.partition("?")
    raw_headers = [(b"host", b"keel.test"), (b"x-request-id", b"req-1")]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if body:
        raw_headers.append((b"content-length", str(len(body)).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": target,
        "raw_path": target.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 50000),
        "server": ("keel.test", 80),
    }
    chunks = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append({**message, "headers": list(message["headers"])} if "headers" in message else message)

    await app(scope, receive, send)
    return sent


Request = tuple[str, str, dict[str, str], bytes]

FAST: list[Request] = [
    ("GET", "/items/7?x=1&x=2&y=", {}, b""),
    ("GET", "/items/me", {}, b""),
    ("GET", "/items/404", {}, b""),
    ("GET", "/items/7?item_id=8", {}, b""),
    ("POST", "/things", {}, b'{"name": "a", "size": 3}'),
    ("POST", "/things", {}, b'{"name": 5}'),
    ("POST", "/things", {}, b"{not json"),
    ("POST", "/things", {}, b""),
    ("GET", "/whoami", {}, b""),
    ("GET", "/whoami", {"Authorization": "Bearer wrong"}, b""),
    ("GET", "/whoami", {"Authorization": "Bearer user-token"}, b""),
    ("GET", "/admin", {"Authorization": "Bearer user-token"}, b""),
    ("GET", "/admin", {"Authorization": "Bearer admin-token"}, b""),
    ("GET", "/maybe", {}, b""),
    ("GET", "/boom", {}, b""),
    ("DELETE", "/nothing", {}, b""),
    ("GET", "/filtered", {}, b""),
    ("GET", "/escapes", {}, b""),
    ("GET", "/escapes?kind=http", {}, b""),
    ("GET", "/escapes?kind=plain", {}, b""),
    ("GET", "/page", {}, b""),
    ("HEAD", "/page", {}, b""),
]

FASTAPI: list[Request] = [
    ("GET", "/nowhere", {}, b""),
    ("POST", "/items/7", {}, b""),
    ("HEAD", "/items/7", {}, b""),
    ("GET", "/items/" + "9" * 5000, {}, b""),
    ("GET", "/items/7/", {}, b""),
    ("GET", "/openapi.json", {}, b""),
    ("GET", "/docs", {}, b""),
]


@pytest.mark.parametrize(("method", "path", "headers", "body"), FAST)
async def test_the_fast_path_answers_as_fastapi_does(
    monkeypatch: pytest.MonkeyPatch, method: str, path: str, headers: dict[str, str], body: bytes
) -> None:
    fast, plain, spy = await pair(monkeypatch)
    served = await call(fast.asgi, method, path, headers=headers, body=body)
    assert spy.calls == 0  # served without FastAPI
    assert served == await call(plain.asgi, method, path, headers=headers, body=body)
    assert served[0]["type"] == "http.response.start"


@pytest.mark.parametrize(("method", "path", "headers", "body"), FASTAPI)
async def test_what_the_fast_path_leaves_to_fastapi_is_answered_as_before(
    monkeypatch: pytest.MonkeyPatch, method: str, path: str, headers: dict[str, str], body: bytes
) -> None:
    fast, plain, spy = await pair(monkeypatch)
    served = await call(fast.asgi, method, path, headers=headers, body=body)
    assert spy.calls == 1
    assert served == await call(plain.asgi, method, path, headers=headers, body=body)


async def test_the_statuses_answered_are_the_envelope_s(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, _, _ = await pair(monkeypatch)
    statuses = [(await call(fast.asgi, m, p, headers=h, body=b))[0]["status"] for m, p, h, b in FAST]
    assert statuses == [
        200, 200, 404, 422, 201, 422, 400, 422, 401, 401, 200, 403, 200, 200, 500, 204, 200, 500, 409, 202,
        200, 200,
    ]  # fmt: skip


async def test_route_metrics_are_the_same_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, _ = await pair(monkeypatch)
    for method, path, headers, body in FAST + FASTAPI:
        for http in (fast, plain):
            await call(http.asgi, method, path, headers=headers, body=body)

    def counts(http: HttpTool) -> list[tuple[str, str, int, dict[str, int]]]:
        return [(r["method"], r["path"], r["count"], r["statuses"]) for r in http.get_route_metrics()]

    assert counts(fast) == counts(plain)
    assert ("GET", "/escapes", 3, {"202": 1, "500": 2}) in counts(fast)


async def test_openapi_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, _ = await pair(monkeypatch)
    assert fast.app.openapi() == plain.app.openapi()
    served = await call(fast.asgi, "GET", "/openapi.json")
    assert served == await call(plain.asgi, "GET", "/openapi.json")
    assert b'"/items/{item_id}"' in served[1]["body"]


async def test_spans_are_the_same_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, _ = await pair(monkeypatch)
    exporters = []
    for http in (fast, plain):
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        exporters.append(exporter)
        if http is fast:
            await http.on_instrument(provider)
        else:  # how on_instrument traced requests before the dispatcher: inside FastAPI's middleware
            http.app.user_middleware.insert(0, Middleware(ServerSpans, tracer_provider=provider))
            http.app.middleware_stack = None
    for method, path, headers, body in FAST + FASTAPI:
        for http in (fast, plain):
            await call(http.asgi, method, path, headers=headers, body=body)

    def seen(exporter: InMemorySpanExporter) -> list[tuple[str, dict[str, Any], str]]:
        return [
            (span.name, dict(span.attributes or {}), span.status.status_code.name)
            for span in exporter.get_finished_spans()
        ]

    assert seen(exporters[0]) == seen(exporters[1])
    assert ("GET /items/{item_id:int}", "500") not in [(s[0], s[2]) for s in seen(exporters[0])]
    assert len(seen(exporters[0])) == len(FAST) + len(FASTAPI)


async def test_a_route_registered_later_is_served_by_the_new_table(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, _, spy = await pair(monkeypatch)
    assert (await call(fast.asgi, "GET", "/late"))[0]["status"] == 404
    assert spy.calls == 1

    async def late(data: dict[str, Any], context: dict[str, Any]) -> dict[str, str]:
        return {"late": "yes"}

    fast.add_endpoint("/late", "GET", late)
    served = await call(fast.asgi, "GET", "/late")
    assert (served[0]["status"], served[1]["body"], spy.calls) == (200, b'{"late":"yes"}', 1)
    fast.release_owner(None)  # type: ignore[arg-type]  # routes registered outside a plugin
    assert (await call(fast.asgi, "GET", "/late"))[0]["status"] == 404


async def test_fastapi_serves_everything_once_it_has_middleware_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, _, _ = await pair(monkeypatch)
    seen: list[str] = []

    class Note:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            seen.append(scope["path"])
            await self.app(scope, receive, send)

    fast.app.user_middleware.insert(0, Middleware(Note))
    fast.app.middleware_stack = None
    assert (await call(fast.asgi, "GET", "/items/7"))[0]["status"] == 200
    assert seen == ["/items/7"]


async def test_routes_others_put_first_are_still_served_by_fastapi(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, _, spy = await pair(monkeypatch)
    mounted: list[str] = []

    async def elsewhere(scope: Scope, receive: Receive, send: Send) -> None:
        mounted.append(scope["path"])
        await Response(b"mounted", status_code=200)(scope, receive, send)

    async def foreign() -> dict[str, str]:
        return {"foreign": "yes"}

    fast.app.add_api_route("/things", foreign, methods=["POST"])  # after Keel's own: Keel's wins
    served = await call(fast.asgi, "POST", "/things", body=b'{"name": "a"}')
    assert (served[0]["status"], spy.calls) == (201, 0)
    fast.app.router.routes.insert(0, Mount("/items", app=elsewhere))  # before them: it wins
    served = await call(fast.asgi, "GET", "/items/7")
    assert (served[1]["body"], mounted, spy.calls) == (b"mounted", ["/items/7"], 1)
    fast.app.router.routes.insert(0, Route("/whoami", lambda request: Response(b"mine")))
    served = await call(fast.asgi, "GET", "/whoami")
    assert (served[1]["body"], spy.calls) == (b"mine", 2)
    assert (await call(fast.asgi, "GET", "/boom"))[0]["status"] == 500  # the rest: the fast path
    assert spy.calls == 2
