"""Every HTTP request gets an id, echoed as ``X-Request-ID`` on its response.

A caller-supplied ``X-Request-ID`` is kept when it is 1 to 128 visible ASCII characters (no spaces,
no control characters), so a gateway's id follows the request through Keel's logs; anything else is
replaced by a fresh random (version 4) UUID in hex, what ``uuid4().hex`` gives, drawn from a
buffer of ``os.urandom`` bytes refilled 256 ids at a time (a system call per id was a measurable
part of a request). The id is stored in the ASGI scope under ``REQUEST_ID_KEY`` and set as
``current_event_id_var`` for the request, so events published while handling it name the request
as their root.

The same middleware, being the first thing every request passes through, also takes an
``?access_token=`` out of the query string (``query_token.py``) so no log line or trace records it.

This is a pure ASGI middleware (no ``BaseHTTPMiddleware``, which would run every request through
an extra task and memory streams): it only looks at one header and appends one to the response.
It wraps the dispatcher and the whole FastAPI app behind it, so even a response written by
Starlette's last-resort error middleware carries the id.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.context import current_event_id_var

from .envelope import LOGGED_MARK
from .query_token import lift_access_token
from .server import answer_cut_off

REQUEST_ID_KEY = "keel.request_id"
REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID_LENGTH = 128


_BATCH = 256
_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))  # an id's 7th byte: version 4
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))  # its 9th byte: the RFC 4122 variant
_ready: deque[str] = deque()  # popleft is atomic, so threads never share an id


os.register_at_fork(after_in_child=_ready.clear)  # a forked child never repeats its parent's ids


def new_request_id() -> str:
    """What ``uuid.uuid4().hex`` returns (version and variant bits set), made a batch at a time."""
    while True:
        try:
            return _ready.popleft()
        except IndexError:
            # The version and variant bits set in the whole batch at once (two byte translations),
            # then one hex string cut into ids: a fraction of formatting each id as an integer.
            raw = bytearray(os.urandom(16 * _BATCH))
            raw[6::16] = raw[6::16].translate(_VERSION_4)
            raw[8::16] = raw[8::16].translate(_VARIANT)
            text = raw.hex()
            _ready.extend([text[i : i + 32] for i in range(0, len(text), 32)])


def accepted_request_id(raw: bytes) -> str | None:
    """The caller's id when it is acceptable, else ``None``."""
    if not 0 < len(raw) <= MAX_REQUEST_ID_LENGTH:
        return None
    value = raw.decode("latin-1")
    if not value.isascii() or not value.isprintable() or " " in value:
        return None
    return value


HeaderAppendingApp = Callable[[Scope, Receive, Send, tuple[bytes, bytes]], Awaitable[None]]
"""An ASGI app's ``call_appending(scope, receive, send, header)``: the app called so that every
response it starts ends with ``header``, as :func:`with_header` would add it (saving the wrapper)."""


def with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    """``send`` adding ``header`` last to the response's start."""

    async def send_with_header(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers: Any = message.get("headers", ())
            message["headers"] = [*headers, header]
        await send(message)

    return send_with_header


class RequestIdMiddleware:
    """The outermost layer of every request (see the module's docstring).

    While ``stopping`` (set by ``HttpTool.serve``) says the server is stopping, a request cancelled
    by the end of the shutdown grace period is answered 503 (``server.answer_cut_off``): a layer of
    its own in front of this one cost every request a coroutine, for a case met once per shutdown.
    """

    def __init__(self, app: ASGIApp, stopping: Callable[[], bool] | None = None) -> None:
        self.app = app
        self.stopping = stopping

    @property
    def app(self) -> ASGIApp:
        return self._app

    @app.setter
    def app(self, app: ASGIApp) -> None:
        self._app = app
        # Looked up once, not per request: the dispatcher adds the header to what it sends.
        self._appending: HeaderAppendingApp | None = getattr(app, "call_appending", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = None
        for name, value in scope["headers"]:
            if name == REQUEST_ID_HEADER:
                request_id = accepted_request_id(value)
                break
        if request_id is None:
            request_id = new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        if scope.get("query_string"):
            lift_access_token(scope)
        header = (REQUEST_ID_HEADER, request_id.encode("latin-1"))
        token = current_event_id_var.set(request_id)
        try:
            appending = self._appending
            if appending is not None:
                await appending(scope, receive, send, header)
            else:
                await self._app(scope, receive, with_header(send, header))
        except asyncio.CancelledError:
            stopping = self.stopping
            if stopping is None or not stopping():
                raise
            await answer_cut_off(send, request_id)
        except Exception as exc:
            # Starlette's error middleware re-raises after answering with our 500 envelope, which
            # already logged it: swallow that one so the server does not log the same bug again.
            if not getattr(exc, LOGGED_MARK, False):
                raise
        finally:
            current_event_id_var.reset(token)
