"""Every HTTP request gets an id, echoed as ``X-Request-ID`` on its response.

A caller-supplied ``X-Request-ID`` is kept when it is 1 to 128 visible ASCII characters (no spaces,
no control characters), so a gateway's id follows the request through Keel's logs; anything else is
replaced by a fresh ``uuid4().hex``. The id is stored in the ASGI scope under ``REQUEST_ID_KEY`` and
set as ``current_event_id_var`` for the request, so events published while handling it name the
request as their root.

The same middleware, being the first thing every request passes through, also takes an
``?access_token=`` out of the query string (``query_token.py``) so no log line or trace records it.

This is a pure ASGI middleware (no ``BaseHTTPMiddleware``, which would run every request through
an extra task and memory streams): it only looks at one header and appends one to the response.
It wraps the whole FastAPI app, so even a response written by Starlette's last-resort error
middleware carries the id.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.context import current_event_id_var

from .envelope import LOGGED_MARK
from .query_token import lift_access_token

REQUEST_ID_KEY = "keel.request_id"
REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID_LENGTH = 128


def new_request_id() -> str:
    return uuid4().hex


def accepted_request_id(raw: bytes) -> str | None:
    """The caller's id when it is acceptable, else ``None``."""
    if not 0 < len(raw) <= MAX_REQUEST_ID_LENGTH:
        return None
    value = raw.decode("latin-1")
    if not value.isascii() or not value.isprintable() or " " in value:
        return None
    return value


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = None
        for name, value in scope["headers"]:
            if name == REQUEST_ID_HEADER:
                request_id = accepted_request_id(value)
                break
        if request_id is None:
            request_id = uuid4().hex
        scope[REQUEST_ID_KEY] = request_id
        if scope.get("query_string"):
            lift_access_token(scope)
        header = (REQUEST_ID_HEADER, request_id.encode("latin-1"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: Any = message.get("headers", ())
                message["headers"] = [*headers, header]
            await send(message)

        token = current_event_id_var.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            # Starlette's error middleware re-raises after answering with our 500 envelope, which
            # already logged it: swallow that one so the server does not log the same bug again.
            if not getattr(exc, LOGGED_MARK, False):
                raise
        finally:
            current_event_id_var.reset(token)
