"""Keel's own routes served without the FastAPI/Starlette shell around them.

Keel registers every endpoint itself (``KeelRoute``), reads the request and writes the response
itself (``endpoint.py``); FastAPI is kept for what it is good at — the OpenAPI document, ``/docs``
and whatever routes and middleware others add — but on the way to a Keel route a request used to
cross six middleware layers (error, telemetry and body-limit wrappers, an ``AsyncExitStack``) and
a router that matches it against every route in turn. That shell was most of Keel's per-request
time. ``Dispatcher`` sits in front of the FastAPI app and serves the requests FastAPI would hand
to a Keel JSON endpoint or page itself; everything else goes to FastAPI unchanged.

It answers exactly as FastAPI would, because it decides by FastAPI's own rules:

- The routes are FastAPI's route list, in its order (``route_order.py`` keeps it sorted). A
  request is FastAPI's when any route before the Keel one could claim it: a non-Keel route whose
  pattern matches the path at all, a Keel route whose path parameters do not convert (FastAPI
  answers that 422), an event stream (served by FastAPI), or a route of a kind not known here
  (a mount, an included router) whose ``matches`` says anything but "no". A Keel route whose
  pattern matches but not the method is passed over, as FastAPI does (a 405 only when nothing
  else matches). The table is rebuilt whenever the route list is replaced or changes length.
- For a literal path the outcome is the same for every request, so it is worked out once per
  table: a dict keyed by method and path. Other paths are matched in order with the routes'
  compiled patterns and convertors.
- The scope gets what FastAPI's router sets (``app``, ``router``, ``endpoint``, ``path_params``,
  ``route``, the exception handlers), and the route's requests are counted and measured as
  ``KeelRoute.handle`` does. An exception escaping a route (the endpoint code answers its own
  failures, so this is rare) gets what FastAPI's exception and server-error middleware give it:
  the registered handler's response, or the 500 envelope and the exception re-raised.
- Nothing is served here while the FastAPI app has middleware of its own, a ``root_path``, a body
  limit or native telemetry switched on, or the request has a ``root_path``: FastAPI serves all.

The OpenTelemetry server spans are a layer in front of this one (``HttpTool.on_instrument``), so
the fast path and FastAPI's are traced alike.
"""

from __future__ import annotations

import re
from time import perf_counter
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette._utils import is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException, WebSocketException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .request_id import with_header
from .routes import KeelRoute

_FALL_THROUGH = object()
"""A scan's answer when FastAPI must serve the request."""

# What one route of the table is, for the scan.
_SERVE = 0  # a Keel route served here
_KEEL_OTHER = 1  # a Keel route FastAPI serves (an event stream)
_FOREIGN = 2  # a plain Starlette/FastAPI route: its pattern matching at all sends the request to FastAPI
_OPAQUE = 3  # anything else: ask its ``matches``


class _Entry:
    __slots__ = ("convertors", "kind", "methods", "regex", "route")

    def __init__(self, route: Any, kind: int) -> None:
        self.route = route
        self.kind = kind
        self.regex = getattr(route, "path_regex", None)
        self.methods: frozenset[str] | None = (
            frozenset(route.methods) if getattr(route, "methods", None) else None
        )
        convertors = getattr(route, "param_convertors", None) or {}
        self.convertors: dict[str, Any] = dict(convertors)


class _Table:
    """One snapshot of FastAPI's route list, prepared for matching."""

    def __init__(self, app: FastAPI) -> None:
        router = app.router
        self.routes = router.routes
        self.count = len(self.routes)
        self.middleware = len(app.user_middleware)
        self.enabled = _servable(app)
        self.entries = _merged([_Entry(route, _kind(route)) for route in self.routes])
        self.exact: dict[tuple[str, str], KeelRoute] = {}
        self.handlers = _Handlers(app)
        # What every request served here adds to its scope, as FastAPI's router and middleware do.
        self.scope_items = {"app": app, "starlette.exception_handlers": self.handlers.scope_value}
        if not self.enabled:
            return
        for entry in self.entries:
            route = entry.route
            if entry.kind != _SERVE or entry.convertors or entry.methods is None:
                continue
            for method in entry.methods:
                found = self.scan(method, route.path, probe=True)
                if isinstance(found, tuple) and found[0] is route:
                    self.exact.setdefault((method, route.path), route)

    def scan(self, method: str, path: str, scope: Scope | None = None, probe: bool = False) -> Any:
        """``(route, path_params)`` of the Keel route FastAPI would serve, else ``_FALL_THROUGH``."""
        for entry in self.entries:
            kind = entry.kind
            if kind == _OPAQUE:
                if probe or scope is None:
                    return _FALL_THROUGH
                try:
                    match, _ = entry.route.matches(scope)
                except Exception:
                    return _FALL_THROUGH
                if match is not Match.NONE:
                    return _FALL_THROUGH
                continue
            regex = entry.regex
            found = regex.match(path) if regex is not None else None
            if found is None:
                continue
            if kind == _FOREIGN:
                return _FALL_THROUGH
            params: dict[str, Any] = {}
            if entry.convertors:
                try:
                    for name, value in found.groupdict().items():
                        params[name] = entry.convertors[name].convert(value)
                except (ValueError, OverflowError):
                    return _FALL_THROUGH  # FastAPI answers the 422 naming the parameter
            if entry.methods is not None and method not in entry.methods:
                continue  # FastAPI's partial match: a later route may still take it
            if kind != _SERVE:
                return _FALL_THROUGH
            return entry.route, params
        return _FALL_THROUGH


def _merged(entries: list[_Entry]) -> list[_Entry]:
    """``entries`` with each run of foreign routes without parameters matched by one pattern (the
    docs' routes come before every Keel route, and would otherwise cost a match each)."""
    result: list[_Entry] = []
    run: list[_Entry] = []

    def close_run() -> None:
        if len(run) > 1:
            merged = _Entry(None, _FOREIGN)
            merged.regex = re.compile("|".join(f"(?:{entry.regex.pattern})" for entry in run if entry.regex))
            result.append(merged)
        else:
            result.extend(run)
        run.clear()

    for entry in entries:
        if entry.kind == _FOREIGN and entry.regex is not None and entry.regex.groups == 0:
            run.append(entry)
            continue
        close_run()
        result.append(entry)
    close_run()
    return result


def _kind(route: Any) -> int:
    if isinstance(route, KeelRoute):
        if type(route).matches is not KeelRoute.matches or getattr(route.spec, "sse", False):
            return _KEEL_OTHER
        return _SERVE
    if type(route) in (Route, APIRoute):
        return _FOREIGN
    return _OPAQUE


def _servable(app: FastAPI) -> bool:
    """Whether FastAPI would hand a matched request straight to the route, as this layer does."""
    if app.user_middleware or app.root_path or getattr(app, "max_body_size", None) is not None:
        return False
    if getattr(app.router, "form_limits", None):
        return False
    config = getattr(app, "_telemetry", None)
    if isinstance(config, dict) and any(config.get(key) for key in ("tracing", "metrics", "logs")):
        return False
    return True


class _Handlers:
    """The exception handlers FastAPI's middleware would use, split the way it splits them."""

    def __init__(self, app: FastAPI) -> None:
        error_handler = None
        others: dict[Any, Any] = {}
        for key, value in app.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                others[key] = value
        defaults = ExceptionMiddleware(_never, debug=app.debug)
        # Starlette's split, built here rather than read from the middleware's private dicts.
        self.status_handlers: dict[int, Any] = {}
        self.exception_handlers: dict[Any, Any] = {
            HTTPException: defaults.http_exception,
            WebSocketException: defaults.websocket_exception,
        }
        for key, value in others.items():
            if isinstance(key, int):
                self.status_handlers[key] = value
            else:
                self.exception_handlers[key] = value
        self.server_error = ServerErrorMiddleware(_never, handler=error_handler, debug=app.debug)
        self.scope_value = (self.exception_handlers, self.status_handlers)


async def _never(scope: Scope, receive: Receive, send: Send) -> None:  # pragma: no cover
    raise RuntimeError("the dispatcher's error middleware never calls its app")


class Dispatcher:
    """ASGI layer in front of the FastAPI app: serves Keel's JSON endpoints and pages itself."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._table: _Table | None = None

    def table(self) -> _Table:
        """The current table, rebuilt when FastAPI's route list or middleware changed."""
        app = self.app
        table = self._table
        routes = app.router.routes
        if (
            table is None
            or table.routes is not routes
            or table.count != len(routes)
            or table.middleware != len(app.user_middleware)
        ):
            table = self._table = _Table(app)
        return table

    def find(self, scope: Scope) -> tuple[KeelRoute, dict[str, Any]] | None:
        """The Keel route (and path parameters) FastAPI would serve ``scope`` with, if served here."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        table = self.table()
        if not table.enabled:
            return None
        route = table.exact.get((scope["method"], scope["path"]))
        if route is not None:
            return route, {}
        found = table.scan(scope["method"], scope["path"], scope)
        return None if found is _FALL_THROUGH else found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.call_appending(scope, receive, send, None)

    async def call_appending(
        self, scope: Scope, receive: Receive, send: Send, header: tuple[bytes, bytes] | None
    ) -> None:
        """Serve the request, adding ``header`` (if any) last to the response's headers: what the
        request-id layer in front calls instead of wrapping ``send`` for its header."""
        # find() inlined (this runs for every request); table() keeps the one staleness rule.
        table = self.table()
        app = self.app
        if not table.enabled or scope["type"] != "http" or scope.get("root_path"):
            await app(scope, receive, send if header is None else with_header(send, header))
            return
        route = table.exact.get((scope["method"], scope["path"]))
        if route is not None:
            params: dict[str, Any] = {}
        else:
            found = table.scan(scope["method"], scope["path"], scope)
            if found is _FALL_THROUGH:
                await app(scope, receive, send if header is None else with_header(send, header))
                return
            route, params = found
        previous = scope.get("path_params")
        if previous:  # what FastAPI does: the parameters a mount above matched stay
            params = {**previous, **params}
        scope.update(table.scope_items)
        if "router" not in scope:
            scope["router"] = app.router
        scope["endpoint"] = route.endpoint
        scope["path_params"] = params
        scope["route"] = route
        # What KeelRoute.handle does for a full match, then FastAPI's middleware for an escape.
        route.in_flight += 1
        noted = [0]  # the status, once the response starts
        started = perf_counter()
        escaped: Exception | None = None
        status_app = route.status_app
        try:
            if status_app is not None:
                await status_app(scope, receive, send, noted, header)
            else:
                await _noting_status(
                    route.app, scope, receive, send if header is None else with_header(send, header), noted
                )
        except Exception as exc:
            escaped = exc
        finally:
            route.in_flight -= 1  # KeelRoute._done, inlined
            if not route.in_flight and route.idle is not None:
                route.idle.set()
            metrics = route.metrics
            if metrics is not None:  # (a route served here is never an event stream: its duration counts)
                stats = route.stats or route.bind_stats(metrics)
                stats.add(noted[0] or 500, (perf_counter() - started) * 1000.0, metrics.clock())
        if escaped is not None:
            if header is not None:
                send = with_header(send, header)
            await _answer_escape(table.handlers, escaped, scope, receive, send, noted[0] != 0)


async def _noting_status(app: ASGIApp, scope: Scope, receive: Receive, send: Send, noted: list[int]) -> None:
    async def send_noting_status(message: Message) -> None:
        if message["type"] == "http.response.start":
            noted[0] = message["status"]
        await send(message)

    await app(scope, receive, send_noting_status)


async def _answer_escape(
    handlers: _Handlers, exc: Exception, scope: Scope, receive: Receive, send: Send, started: bool
) -> None:
    """What Starlette's ``ExceptionMiddleware`` and then ``ServerErrorMiddleware`` do with ``exc``."""
    handler: Any = None
    response: Any
    if isinstance(exc, HTTPException):
        handler = handlers.status_handlers.get(exc.status_code)
    if handler is None:
        for cls in type(exc).__mro__:
            if cls in handlers.exception_handlers:
                handler = handlers.exception_handlers[cls]
                break
    if handler is not None:
        if not started:
            request = Request(scope, receive, send)
            if is_async_callable(handler):
                response = await handler(request, exc)
            else:
                response = await run_in_threadpool(handler, request, exc)
            if response is not None:
                await response(scope, receive, send)
            exc.__traceback__ = None
            return
        try:
            raise RuntimeError("Caught handled exception, but response already started.") from exc
        except RuntimeError as wrapped:
            exc = wrapped
    middleware = handlers.server_error
    request = Request(scope)
    error_handler: Any = middleware.handler
    if middleware.debug:
        response = await run_in_threadpool(middleware.debug_response, request, exc)
    elif error_handler is None:
        response = middleware.error_response(request, exc)
    elif is_async_callable(error_handler):
        response = await error_handler(request, exc)
    else:
        response = await run_in_threadpool(error_handler, request, exc)
    if not started:
        await response(scope, receive, send)
    raise exc
