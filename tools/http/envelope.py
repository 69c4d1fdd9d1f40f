"""One error shape for every failed request: ``{"error": {"kind", "message", "request_id"}}``.

Whatever goes wrong — a plugin raising one of Keel's request errors, an unknown route, a wrong
method, a body that is not JSON, a validation failure, FastAPI's own ``HTTPException`` or a bug —
the caller gets this envelope with the matching status, and can branch on ``kind`` (a closed set,
``core.errors.ErrorKind``). Validation failures add ``fields``: one entry per offending field with
its ``field`` name, ``location`` (path, query, body) and ``message``.

An outage is never a 500: a ``ToolUnavailableError`` (a tool said its infrastructure is gone)
reaching the envelope from any handler is a 503 of kind ``unavailable`` with ``Retry-After``
(``retry_after`` on the error, or :data:`UNAVAILABLE_RETRY_AFTER` seconds), logged as a warning;
the message names the error's type, not its text (which may name hosts).

A bug (any other exception that is not a request error) is a 500 whose message is generic: its type,
text and traceback go to the log with the request id, never to the caller.

A ``RequestError`` may carry two optional attributes the envelope honours: ``fields`` (a list of
dicts as above) and ``headers`` (extra response headers, e.g. ``WWW-Authenticate``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_json
from starlette.exceptions import HTTPException

from core.errors import ErrorKind, InvalidInputError, RequestError, ToolUnavailableError

log = logging.getLogger("keel.http")

UNAVAILABLE_RETRY_AFTER = 5
"""Seconds a client is told to wait after an outage answer, unless the error says otherwise."""
INTERNAL_MESSAGE = "internal server error; quote the request id when reporting it"
LOGGED_MARK = "_keel_logged"  # set on an exception already logged as a 500, so it is logged once

_KIND_BY_STATUS = {
    400: ErrorKind.BAD_REQUEST,
    401: ErrorKind.UNAUTHORIZED,
    403: ErrorKind.FORBIDDEN,
    404: ErrorKind.NOT_FOUND,
    405: ErrorKind.METHOD_NOT_ALLOWED,
    409: ErrorKind.CONFLICT,
    422: ErrorKind.INVALID,
    503: ErrorKind.UNAVAILABLE,
}

Problem = tuple[int, bytes, list[tuple[bytes, bytes]]]
"""A ready-to-send response: status, body, headers (for a failure: the envelope and extra headers)."""


def kind_for_status(status: int) -> ErrorKind:
    kind = _KIND_BY_STATUS.get(status)
    if kind is not None:
        return kind
    return ErrorKind.INTERNAL if status >= 500 else ErrorKind.BAD_REQUEST


def envelope(
    kind: str, message: str, request_id: str | None, fields: list[dict[str, Any]] | None = None
) -> bytes:
    error: dict[str, Any] = {"kind": str(kind), "message": message, "request_id": request_id}
    if fields is not None:
        error["fields"] = fields
    return to_json({"error": error})


def invalid_input(message: str, fields: list[dict[str, Any]]) -> InvalidInputError:
    """A 422 naming the offending fields."""
    return InvalidInputError(message, fields=fields)


def validation_fields(exc: ValidationError, location: str) -> list[dict[str, Any]]:
    return [
        {
            "field": ".".join(str(part) for part in error["loc"]) or location,
            "location": location,
            "message": error["msg"],
            "type": error["type"],
        }
        for error in exc.errors(include_url=False)
    ]


def encode_headers(headers: Mapping[str, str] | None) -> list[tuple[bytes, bytes]]:
    if not headers:
        return []
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


def problem_for(exc: Exception, request_id: str | None, where: str) -> Problem:
    """The response for ``exc``; a bug is logged here (once) with the request id."""
    if isinstance(exc, RequestError):
        message = str(exc) or HTTPStatus(exc.status_code).phrase
        fields = getattr(exc, "fields", None)
        body = envelope(exc.kind, message, request_id, list(fields) if fields is not None else None)
        return exc.status_code, body, encode_headers(getattr(exc, "headers", None))
    if isinstance(exc, HTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        body = envelope(kind_for_status(exc.status_code), detail, request_id)
        return exc.status_code, body, encode_headers(exc.headers)
    if isinstance(exc, ToolUnavailableError):
        return _unavailable(exc, request_id, where)
    if not getattr(exc, LOGGED_MARK, False):
        log.error("%s failed (request id %s)", where, request_id, exc_info=exc)
        try:
            setattr(exc, LOGGED_MARK, True)
        except AttributeError:  # pragma: no cover - exceptions with __slots__
            pass
    return 500, envelope(ErrorKind.INTERNAL, INTERNAL_MESSAGE, request_id), []


def _unavailable(exc: ToolUnavailableError, request_id: str | None, where: str) -> Problem:
    """A tool's outage: 503 with Retry-After, the tool's own message (it names the system, no code)."""
    log.warning("%s: a tool is unavailable (request id %s): %s", where, request_id, exc)
    hint = getattr(exc, "retry_after", None)
    seconds = (
        max(1, math.ceil(hint)) if isinstance(hint, int | float) and hint > 0 else UNAVAILABLE_RETRY_AFTER
    )
    # The type names the system (DatabaseUnavailableError); its text, which may name hosts, is logged only.
    message = (
        f"a service this endpoint needs is unavailable right now ({type(exc).__name__}); try again later"
    )
    return (
        503,
        envelope(ErrorKind.UNAVAILABLE, message, request_id),
        [(b"retry-after", str(seconds).encode())],
    )
