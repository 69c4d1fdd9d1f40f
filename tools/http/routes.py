"""FastAPI routes that document a Keel endpoint in OpenAPI but serve it with Keel's own hot path.

``KeelRoute`` is a FastAPI ``APIRoute`` built from a stand-in endpoint whose signature declares the
path parameters (typed from their convertors) and the request body (the ``request_model``, or a
free-form JSON object for POST/PUT/PATCH), so ``/docs`` shows the real contract: tags, models,
status code, the error envelope for 4xx and 5xx. Its ASGI ``app`` is then replaced by the
endpoint's own callable (``endpoint.py``/``sse.py``), so serving never goes through FastAPI's
dependency injection (and usually not through FastAPI at all: ``dispatch.py``). It counts the
requests it is serving, so a route removed by a plugin reload can be waited for until the requests
that matched it before have finished.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
import uuid
from typing import Any

from fastapi import Body, Path, Query
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.convertors import FloatConvertor, IntegerConvertor, UUIDConvertor
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from .endpoint import JSON_HEADERS, EndpointSpec, StatusApp
from .envelope import envelope
from .request_id import REQUEST_ID_KEY
from .route_metrics import RouteMetrics, RouteStats
from .sse import Closer

_CONVERTOR_TYPES: dict[type, type] = {IntegerConvertor: int, FloatConvertor: float, UUIDConvertor: uuid.UUID}
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
PATH_ERROR_KEY = "keel.path_error"


class ErrorDetail(BaseModel):
    kind: str
    message: str
    request_id: str | None
    fields: list[dict[str, Any]] | None = None


class ErrorEnvelope(BaseModel):
    """The body of every failed request."""

    error: ErrorDetail


class EventStream(Response):
    """Documents a server-sent-events endpoint's media type (never instantiated for serving)."""

    media_type = "text/event-stream"


def path_parameters(path: str) -> dict[str, type]:
    """``{name: python type}`` of the ``{name}`` / ``{name:convertor}`` segments of ``path``."""
    _, _, convertors = compile_path(path)
    return {name: _CONVERTOR_TYPES.get(type(c), str) for name, c in convertors.items()}


def _doc_endpoint(spec: EndpointSpec) -> Any:
    return _stand_in(
        spec.path,
        spec.method,
        spec.sse,
        spec.request_model,
        inspect.getdoc(spec.handler),
        spec.identity,
        spec.query_model,
    )


@functools.lru_cache(maxsize=1024)
def _stand_in(
    path: str,
    method: str,
    sse: bool,
    request_model: type[BaseModel] | None,
    doc: str | None,
    identity: str,
    query_model: type[BaseModel] | None = None,
) -> Any:
    """The documentation stand-in for one endpoint shape, built once and reused.

    FastAPI remembers what it learned about every endpoint callable it has seen (thousands of
    them); a plugin reloaded again and again registers the same route each time, and a new
    function each time would make that memory grow with every reload.
    """
    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=Path())
        for name, kind in path_parameters(path).items()
    ]
    taken = {p.name for p in parameters}
    for name, info in (query_model.model_fields if query_model is not None else {}).items():
        if name in taken:
            continue
        default = Query(...) if info.is_required() else Query(info.default, description=info.description)
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=info.annotation, default=default
            )
        )
    body_name = "request_body"
    while body_name in {p.name for p in parameters}:
        body_name = f"_{body_name}"
    if request_model is not None:
        parameters.append(
            inspect.Parameter(
                body_name, inspect.Parameter.KEYWORD_ONLY, annotation=request_model, default=Body()
            )
        )
    elif method in _BODY_METHODS and not sse:
        parameters.append(
            inspect.Parameter(
                body_name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=dict[str, Any] | None,
                default=Body(None),
            )
        )

    def endpoint(**_: Any) -> None:  # pragma: no cover - never called: KeelRoute serves itself
        raise RuntimeError("documentation stand-in")

    endpoint.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    endpoint.__doc__ = doc
    endpoint.__name__ = identity.replace(".", "_")
    return endpoint


class KeelRoute(APIRoute):
    """One registered endpoint: documented like a FastAPI route, served by ``serve_app``."""

    metrics: RouteMetrics | None = None  # set by the http tool when the route is registered
    stats: RouteStats | None = None  # this route's in ``metrics``, once it has served a request

    def __init__(
        self,
        spec: EndpointSpec,
        serve_app: ASGIApp,
        closer: Closer | None = None,
        status_app: StatusApp | None = None,
    ) -> None:
        errors: dict[int | str, dict[str, Any]] = {
            422: {"model": ErrorEnvelope, "description": "Invalid input (the fields are named)"},
            "4XX": {"model": ErrorEnvelope, "description": "Request error"},
            "5XX": {"model": ErrorEnvelope, "description": "Server error"},
        }
        doc = inspect.getdoc(spec.handler) or ""
        super().__init__(
            spec.path,
            _doc_endpoint(spec),
            methods=[spec.method],
            response_model=None if spec.sse else spec.response_model,
            status_code=None if spec.sse else spec.status_code,
            tags=list(spec.tags) or None,
            summary=doc.splitlines()[0] if doc else spec.identity,
            responses=errors,
            name=spec.identity,
            response_class=EventStream if spec.sse else JSONResponse,
        )
        self.spec = spec
        self.app = serve_app
        self.status_app = status_app  # serve_app reporting its status, for the dispatcher
        self.closer = closer  # ends the route's open event streams when it is removed or replaced
        self.in_flight = 0
        self.idle: asyncio.Event | None = None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        try:
            return super().matches(scope)
        except (ValueError, OverflowError):
            # A segment matched the convertor's pattern but does not convert (an int of 5000 digits
            # is over Python's conversion limit): a 422 naming it, not a bug.
            return Match.FULL, {"endpoint": self.endpoint, "path_params": {}, PATH_ERROR_KEY: True}

    def _path_errors(self, scope: Scope) -> list[dict[str, Any]]:
        match = self.path_regex.match(scope.get("path", ""))
        fields: list[dict[str, Any]] = []
        for name, value in (match.groupdict() if match else {}).items():
            try:
                self.param_convertors[name].convert(value)
            except (ValueError, OverflowError) as exc:
                fields.append({"field": name, "location": "path", "message": str(exc)[:200]})
        return fields

    async def _refuse_path(self, scope: Scope, send: Send) -> None:
        fields = self._path_errors(scope)
        names = ", ".join(f["field"] for f in fields) or "path"
        body = envelope("invalid", f"invalid path parameter: {names}", scope.get(REQUEST_ID_KEY), fields)
        headers = [JSON_HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 422, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get(PATH_ERROR_KEY):
            await self._refuse_path(scope, send)
            return
        self.in_flight += 1
        metrics = self.metrics
        if metrics is None:
            try:
                await super().handle(scope, receive, send)
            finally:
                self._done()
            return
        status = 500  # what the client sees when the app fails before it answers
        started = time.perf_counter()

        async def send_noting_status(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await super().handle(scope, receive, send_noting_status)
        finally:
            self._done()
            elapsed = None if self.spec.sse else (time.perf_counter() - started) * 1000.0
            (self.stats or self.bind_stats(metrics)).add(status, elapsed, metrics.clock())

    def bind_stats(self, metrics: RouteMetrics) -> RouteStats:
        """This route's stats in ``metrics``, kept for the requests after this one."""
        spec = self.spec
        self.stats = metrics.stats(spec.method, spec.path)
        return self.stats

    def _done(self) -> None:
        self.in_flight -= 1
        if not self.in_flight and self.idle is not None:
            self.idle.set()

    async def wait_idle(self) -> None:
        """Return once no request is being served by this route."""
        while self.in_flight:
            self.idle = asyncio.Event()
            await self.idle.wait()
