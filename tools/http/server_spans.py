"""Server spans and the request-duration metric, by OpenTelemetry's stable HTTP conventions.

``ServerSpans`` is a plain ASGI middleware the http tool puts in front of its routes when the
telemetry tool hands over its providers (``HttpTool.on_instrument``). Per HTTP request:

* a SERVER span, a child of the caller's trace when the request carries ``traceparent`` (the
  globally configured propagator extracts it), current while the handler runs, so the tool calls a
  handler makes are its children. It is named ``"{method} {route}"`` (``http.route`` is the
  matched route template, ``/items/{item_id}``), or just the method when no route matched;
* attributes ``http.request.method`` (``_OTHER`` with ``http.request.method_original`` for a
  method the conventions do not know), ``url.path``, ``url.scheme``, ``url.query`` when present,
  ``http.route``, ``http.response.status_code``, ``network.protocol.version``, ``client.address``
  / ``client.port``, ``server.address`` / ``server.port`` (from ``Host``) and
  ``user_agent.original``; every name comes from the ``opentelemetry-semantic-conventions``
  package;
* status ERROR, with ``error.type`` the status code, only for a 5xx answer (a 4xx is the client's
  error, not the server's); a handler that raises gets ``error.type`` the exception's type;
* ``http.server.request.duration`` (seconds, the conventions' bucket boundaries) with the method,
  scheme, route, status code, protocol version and ``error.type``.

It replaces ``opentelemetry-instrumentation-fastapi``, which emits the old attribute names unless
a process-wide opt-in variable is set before its first use, and adds two internal spans per
request for the ASGI ``send``/``receive`` calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from time import perf_counter
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.semconv.attributes.client_attributes import CLIENT_ADDRESS, CLIENT_PORT
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.attributes.http_attributes import (
    HTTP_REQUEST_METHOD,
    HTTP_REQUEST_METHOD_ORIGINAL,
    HTTP_RESPONSE_STATUS_CODE,
    HTTP_ROUTE,
)
from opentelemetry.semconv.attributes.network_attributes import NETWORK_PROTOCOL_VERSION
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT
from opentelemetry.semconv.attributes.url_attributes import URL_PATH, URL_QUERY, URL_SCHEME
from opentelemetry.semconv.attributes.user_agent_attributes import USER_AGENT_ORIGINAL
from opentelemetry.semconv.metrics.http_metrics import HTTP_SERVER_REQUEST_DURATION
from opentelemetry.trace import SpanKind, Status, StatusCode

SCOPE = "keel.http"
KNOWN_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _HeaderGetter(Getter[Any]):
    """Reads a carrier of ASGI headers (a list of ``(name, value)`` byte pairs) for the propagator."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        wanted = key.lower().encode("latin-1")
        found = [value.decode("latin-1") for name, value in carrier if name.lower() == wanted]
        return found or None

    def keys(self, carrier: Any) -> list[str]:
        return [name.decode("latin-1") for name, _ in carrier]


_GETTER = _HeaderGetter()


class ServerSpans:
    """ASGI middleware: one SERVER span and one duration measurement per HTTP request."""

    def __init__(self, app: ASGIApp, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.app = app
        self._tracer = (tracer_provider if tracer_provider is not None else trace).get_tracer(SCOPE)
        meter = (meter_provider if meter_provider is not None else metrics).get_meter(SCOPE)
        self._duration = meter.create_histogram(
            HTTP_SERVER_REQUEST_DURATION,
            unit="s",
            description="Duration of HTTP server requests.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        headers = scope.get("headers") or []
        parent = propagate.extract(headers, getter=_GETTER)
        attributes = _request_attributes(scope, headers)
        method = attributes[HTTP_REQUEST_METHOD]
        span = self._tracer.start_span(
            "HTTP" if method == "_OTHER" else method, parent, kind=SpanKind.SERVER, attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        status: list[int] = []

        async def send_noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        error_type: str | None = None
        try:
            await self.app(scope, receive, send_noting_status)
        except Exception as exc:
            error_type = type(exc).__qualname__
            if span.is_recording():
                span.record_exception(exc)
            raise
        finally:
            otel_context.detach(token)
            self._finish(span, scope, attributes, status[0] if status else None, error_type, started)

    def _finish(
        self,
        span: Any,
        scope: Scope,
        attributes: dict[str, Any],
        status: int | None,
        error_type: str | None,
        started: float,
    ) -> None:
        route = _route(scope)
        if status is None and error_type is not None:
            status = 500  # the error middleware outside answers 500 for what escaped
        if error_type is None and status is not None and status >= 500:
            error_type = str(status)
        if span.is_recording():
            if route:
                span.set_attribute(HTTP_ROUTE, route)
                span.update_name(f"{span.name} {route}")
            if status is not None:
                span.set_attribute(HTTP_RESPONSE_STATUS_CODE, status)
            if error_type is not None:
                span.set_attribute(ERROR_TYPE, error_type)
                span.set_status(Status(StatusCode.ERROR))
        span.end()
        measured: dict[str, Any] = {
            HTTP_REQUEST_METHOD: attributes[HTTP_REQUEST_METHOD],
            URL_SCHEME: attributes[URL_SCHEME],
        }
        if NETWORK_PROTOCOL_VERSION in attributes:
            measured[NETWORK_PROTOCOL_VERSION] = attributes[NETWORK_PROTOCOL_VERSION]
        if route:
            measured[HTTP_ROUTE] = route
        if status is not None:
            measured[HTTP_RESPONSE_STATUS_CODE] = status
        if error_type is not None:
            measured[ERROR_TYPE] = error_type
        self._duration.record(perf_counter() - started, measured)


def _request_attributes(scope: Scope, headers: Any) -> dict[str, Any]:
    method = str(scope.get("method", "")).upper()
    attributes: dict[str, Any] = {}
    if method in KNOWN_METHODS:
        attributes[HTTP_REQUEST_METHOD] = method
    else:
        attributes[HTTP_REQUEST_METHOD] = "_OTHER"
        attributes[HTTP_REQUEST_METHOD_ORIGINAL] = scope.get("method", "")
    attributes[URL_SCHEME] = scope.get("scheme", "http")
    attributes[URL_PATH] = scope.get("path", "")
    query = scope.get("query_string") or b""
    if query:
        attributes[URL_QUERY] = query.decode("latin-1")
    version = scope.get("http_version")
    if version:
        attributes[NETWORK_PROTOCOL_VERSION] = version
    client = scope.get("client")
    if client:
        attributes[CLIENT_ADDRESS] = client[0]
        attributes[CLIENT_PORT] = client[1]
    for name, value in headers:
        if name == b"host":
            host, port = _split_host(value.decode("latin-1"))
            attributes[SERVER_ADDRESS] = host
            if port is not None:
                attributes[SERVER_PORT] = port
        elif name == b"user-agent":
            attributes[USER_AGENT_ORIGINAL] = value.decode("latin-1")
    return attributes


def _split_host(host: str) -> tuple[str, int | None]:
    if host.startswith("["):  # [::1]:8000
        address, _, rest = host[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        address, _, port = host.partition(":")
    return address, int(port) if port.isdigit() else None


def _route(scope: Scope) -> str | None:
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return str(path) if path else None
