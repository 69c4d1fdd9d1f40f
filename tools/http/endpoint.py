"""From an HTTP request to ``handler(data, context)`` and back: the per-request hot path.

Each endpoint gets one ASGI callable, built once at registration, that reads the request itself
(no FastAPI dependency injection, no ``Request`` object) and writes the response itself. The rules:

``data`` is one flat dict merging the path parameters (converted by their ``{name:int}``
convertors), the query parameters (a repeated key becomes a list of strings) and the JSON body.
- A key may come from one source only: a query or body key that repeats a path parameter (or a
  body key that repeats a query parameter) is a 422 naming the key, so a path parameter can never
  be overridden.
- The body is parsed as JSON whatever its ``Content-Type`` (``curl -d`` sends a form type);
  malformed JSON is a 400. Without a ``request_model`` the body must be a JSON object (else 422).
  An absent or empty body adds nothing.
- With a ``query_model`` (a pydantic model class) the query is validated by it instead (its
  fields are documented as the query parameters): ``data`` gets its fields, converted (``"5"``
  for an ``int`` field is ``5``), unknown query keys are left out, a misfit is a 422 naming it.
- With a ``request_model`` (a pydantic model class) the body is validated by it — an absent body
  validates as ``{}`` — and a failure is a 422 whose ``fields`` name each bad field. ``data`` then
  holds ``model.model_dump()`` (a dict, like every other endpoint) and ``context["model"]`` the
  validated model instance.

``context`` holds ``request_id``, ``method``, ``path``, ``headers`` (lower-case names; a repeated
header keeps its last value), ``client`` (the peer's host, or ``None``), ``query`` (the parsed
query; an ``access_token`` in it reads ``"REDACTED"``, see ``query_token.py``), ``identity``
(verified token claims, or ``None``) and, with a request model, ``model``.

The handler runs with ``current_identity_var`` set to its identity and ``current_event_id_var`` to
the request id; a plain ``def`` handler runs in the worker threadpool, never on the event loop.
Its return value is the JSON body with the endpoint's status code: dicts, lists, scalars, pydantic
models, dataclasses, datetimes and UUIDs are serialised; with a ``response_model`` the value is
validated and filtered through it first. ``None`` is an empty body: 204 when the endpoint's status
is the default 200, else that status. A Starlette ``Response`` (see ``HttpTool.json_response``) is
sent as it is. Failures become the error envelope (``envelope.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json, to_json
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.context import current_identity_var
from core.errors import ExitAttemptError, RequestError

from .auth import AuthGate, AuthMode, bearer_token
from .envelope import Problem, invalid_input, problem_for, validation_fields
from .query_token import ACCESS_TOKEN_KEY
from .request_id import REQUEST_ID_KEY, new_request_id

JSON_HEADERS = (b"content-type", b"application/json")
SSE_CONTROL_PARAMETERS = frozenset({"access_token", "last_event_id"})
_KEPT_LENGTHS = 4096
_LENGTH_HEADERS = [(b"content-length", str(size).encode("latin-1")) for size in range(_KEPT_LENGTHS)]
"""The ``Content-Length`` header of a small body, made once rather than per response."""


@dataclass(frozen=True)
class EndpointSpec:
    """Everything ``add_endpoint`` was told, plus who registered it."""

    path: str
    method: str
    handler: Callable[..., Any]
    identity: str
    owner: str | None
    request_model: type[BaseModel] | None = None
    query_model: type[BaseModel] | None = None
    response_model: Any = None
    tags: tuple[str, ...] = ()
    auth: AuthMode = False
    status_code: int = 200
    sse: bool = False


class PayloadTooLarge(RequestError):
    """The body is over ``HTTP_MAX_BODY_BYTES``: 413."""

    status_code = 413


def parse_query(query_string: bytes) -> dict[str, Any]:
    query: dict[str, Any] = {}
    for key, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        existing = query.get(key)
        if existing is None:
            query[key] = value
        elif isinstance(existing, list):
            existing.append(value)
        else:
            query[key] = [existing, value]
    return query


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"the request body is larger than {limit} bytes (HTTP_MAX_BODY_BYTES)")
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _conflict(key: str, location: str, other: str) -> RequestError:
    return invalid_input(
        f"{location} parameter {key!r} conflicts with the {other} parameter of the same name",
        [{"field": key, "location": location, "message": f"already given as a {other} parameter"}],
    )


def _merge(data: dict[str, Any], extra: Mapping[str, Any], location: str, sources: dict[str, str]) -> None:
    for key in extra:
        if key in data:
            raise _conflict(key, location, sources.get(key, "path"))
    data.update(extra)


def _parse_body(body: bytes, request_model: type[BaseModel] | None) -> tuple[dict[str, Any], Any]:
    """The body's keys for ``data``, and the validated model (or ``None``)."""
    if request_model is not None:
        try:
            model = (
                request_model.model_validate_json(body) if body.strip() else request_model.model_validate({})
            )
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            malformed = [error["msg"] for error in errors if error["type"] == "json_invalid"]
            if malformed:
                raise RequestError(f"the request body is not valid JSON: {malformed[0]}") from None
            fields = validation_fields(exc, "body")
            names = ", ".join(f["field"] for f in fields)
            raise invalid_input(f"invalid request body: {names}", fields) from None
        return model.model_dump(), model
    if not body.strip():
        return {}, None
    try:
        parsed = from_json(body)
    except ValueError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from None
    if parsed is None:  # a JSON null is no body, as the documented schema (an object or null) says
        return {}, None
    if not isinstance(parsed, dict):
        raise invalid_input(
            f"the JSON body must be an object, got {type(parsed).__name__}",
            [{"field": "body", "location": "body", "message": "expected a JSON object"}],
        )
    return parsed, None


def _parse_query_model(query: dict[str, Any], query_model: type[BaseModel]) -> dict[str, Any]:
    """The query validated by ``query_model``: its fields only, converted; a misfit is a 422."""
    try:
        return query_model.model_validate(query).model_dump()
    except ValidationError as exc:
        fields = validation_fields(exc, "query")
        names = ", ".join(f["field"] for f in fields)
        raise invalid_input(f"invalid query parameters: {names}", fields) from None


Begin = Callable[[Scope, str], tuple[dict[str, Any], dict[str, Any], dict[str, str], dict[str, Any]]]
Finish = Callable[
    [Scope, Receive, dict[str, Any], dict[str, Any], dict[str, str], dict[str, Any]], Awaitable[None]
]


def make_request_parts(spec: EndpointSpec, gate: AuthGate, max_body: int) -> tuple[Begin, Finish, bool]:
    """The request reader in two parts, so a request needing nothing awaited costs no coroutine.

    ``begin(scope, request_id)`` gives ``(data, context, headers, query)`` with ``data`` holding
    the path parameters only; ``finish(scope, receive, data, context, headers, query)`` does the
    rest (identity, query model, query and body into ``data``). The flag says whether ``finish``
    must always run; else it must only when :func:`has_body` says so of the headers, and without it
    the query alone is merged into ``data`` (``merge_query``).
    """
    auth = spec.auth
    request_model = spec.request_model
    query_model = spec.query_model
    sse = spec.sse

    def begin(
        scope: Scope, request_id: str
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, str], dict[str, Any]]:
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:  # a loop is faster than a comprehension on 3.11
            headers[name.decode("latin-1")] = value.decode("latin-1")
        query_string = scope["query_string"]
        query = parse_query(query_string) if query_string else {}
        client = scope.get("client")
        context: dict[str, Any] = {
            "request_id": request_id,
            "method": scope["method"],
            "path": scope["path"],
            "headers": headers,
            "client": client[0] if client else None,
            "identity": None,
            "query": query,
        }
        path_params = scope.get("path_params")
        data: dict[str, Any] = dict(path_params) if path_params else {}
        return data, context, headers, query

    async def finish(
        scope: Scope,
        receive: Receive,
        data: dict[str, Any],
        context: dict[str, Any],
        headers: dict[str, str],
        query: dict[str, Any],
    ) -> None:
        if auth:
            token = bearer_token(headers)
            if token is None and sse:
                token = scope.get(ACCESS_TOKEN_KEY)  # lifted out of the query by the middleware
            context["identity"] = await gate.identify(auth, token)
        if sse and query:
            query = {k: v for k, v in query.items() if k not in SSE_CONTROL_PARAMETERS}
        if query_model is not None:
            query = _parse_query_model(query, query_model)
        if query:
            _merge(data, query, "query", {})
        length = headers.get("content-length")
        body = b""
        if (length is not None and length != "0") or "transfer-encoding" in headers:
            if length is not None and length.isdigit() and int(length) > max_body:
                raise PayloadTooLarge(
                    f"the request body is larger than {max_body} bytes (HTTP_MAX_BODY_BYTES)"
                )
            body = await read_body(receive, max_body)
        if body or request_model is not None:
            fields, model = _parse_body(body, request_model)
            if fields:
                _merge(data, fields, "body", dict.fromkeys(query, "query"))
            if model is not None:
                context["model"] = model

    return begin, finish, bool(auth) or sse or query_model is not None or request_model is not None


def has_body(headers: Mapping[str, str]) -> bool:
    """Whether the request's headers announce a body (which ``finish`` reads)."""
    length = headers.get("content-length")
    return (length is not None and length != "0") or "transfer-encoding" in headers


def merge_query(data: dict[str, Any], query: dict[str, Any]) -> None:
    """What ``finish`` does with the query of a request with nothing else to read."""
    if query:
        _merge(data, query, "query", {})


def make_request_reader(
    spec: EndpointSpec, gate: AuthGate, max_body: int
) -> Callable[[Scope, Receive, str], Awaitable[tuple[dict[str, Any], dict[str, Any]]]]:
    """Builds ``read(scope, receive, request_id) -> (data, context)`` for one endpoint."""
    begin, finish, _ = make_request_parts(spec, gate, max_body)

    async def read(scope: Scope, receive: Receive, request_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        data, context, headers, query = begin(scope, request_id)
        await finish(scope, receive, data, context, headers, query)
        return data, context

    return read


async def _send_response(
    response: Response,
    scope: Scope,
    receive: Receive,
    send: Send,
    noted: list[int],
    extra: tuple[bytes, bytes] | None,
) -> None:
    """Send a response a handler returned, noting the status it starts with."""

    async def send_noting_status(message: Message) -> None:
        if message["type"] == "http.response.start":
            noted[0] = message["status"]
            if extra is not None:
                message["headers"] = [*message.get("headers", ()), extra]
        await send(message)

    await response(scope, receive, send_noting_status)


StatusApp = Callable[[Scope, Receive, Send, list[int], tuple[bytes, bytes] | None], Awaitable[None]]
"""An endpoint's ASGI callable with two more arguments: a one-item list it writes the response's
status into just before the response starts (``0`` until then), and a header to add last to the
response (the request id's, or ``None``). The dispatcher needs the status for its metrics and
error handling, and wrapping ``send`` for either cost more than the rest of its work."""


def make_endpoint_app(spec: EndpointSpec, gate: AuthGate, max_body: int) -> ASGIApp:
    """The ASGI callable serving one JSON endpoint."""
    return make_endpoint(spec, gate, max_body)[0]


def make_endpoint(  # noqa: C901  the per-request path is inlined in ``serve`` on purpose
    spec: EndpointSpec, gate: AuthGate, max_body: int
) -> tuple[ASGIApp, StatusApp]:
    """The ASGI callable serving one JSON endpoint, and the same as a :data:`StatusApp`."""
    begin, finish, always_finish = make_request_parts(spec, gate, max_body)
    handler = spec.handler
    identity = spec.identity
    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )
    default_status = spec.status_code
    empty_status = 204 if default_status == 200 else default_status
    where = f"{spec.method} {spec.path} ({identity})"
    adapter: TypeAdapter[Any] | None = (
        TypeAdapter(spec.response_model) if spec.response_model is not None else None
    )

    def encode(result: Any) -> Problem | Response:
        if result is None:
            return empty_status, b"", []
        if isinstance(result, Response):
            return result
        if adapter is not None:
            body = adapter.dump_json(adapter.validate_python(result, from_attributes=True))
        else:
            body = to_json(result)
        return default_status, body, [JSON_HEADERS]

    async def serve(
        scope: Scope, receive: Receive, send: Send, noted: list[int], extra: tuple[bytes, bytes] | None
    ) -> None:
        request_id = scope.get(REQUEST_ID_KEY) or new_request_id()
        token = current_identity_var.set(identity)
        outcome: Problem | Response
        try:
            data, context, asked, query = begin(scope, request_id)
            if always_finish or has_body(asked):
                await finish(scope, receive, data, context, asked, query)
            elif query:
                merge_query(data, query)
            if is_async:
                result = await handler(data, context)
            else:
                result = await run_in_threadpool(handler, data, context)
                if inspect.isawaitable(result):
                    result = await result
            if result is None:
                outcome = empty_status, b"", []
            elif adapter is None and not isinstance(result, Response):
                outcome = default_status, to_json(result), [JSON_HEADERS]  # encode(), inlined
            else:
                outcome = encode(result)
        except ClientDisconnect:
            return
        except Exception as exc:
            status, body, headers = problem_for(exc, request_id, where)
            outcome = status, body, [JSON_HEADERS, *headers]
        except (SystemExit, KeyboardInterrupt) as exc:  # a handler's sys.exit() is a 500, never an exit
            status, body, headers = problem_for(ExitAttemptError(exc, where), request_id, where)
            outcome = status, body, [JSON_HEADERS, *headers]
        finally:
            current_identity_var.reset(token)
        if isinstance(outcome, Response):
            await _send_response(outcome, scope, receive, send, noted, extra)
            return
        status, body, headers = outcome
        if status != 204 and status != 304:
            size = len(body)
            headers.append(
                _LENGTH_HEADERS[size]
                if size < _KEPT_LENGTHS
                else (b"content-length", str(size).encode("latin-1"))
            )
        if extra is not None:
            headers.append(extra)
        noted[0] = status
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await serve(scope, receive, send, [0], None)

    return app, serve
