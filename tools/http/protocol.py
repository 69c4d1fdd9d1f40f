"""uvicorn's httptools protocol with the bounds of ``bounds.py`` enforced on every connection.

uvicorn's own protocol buffers a request head of any size (httptools accumulates a header value
until its end), waits forever for a slow head or body, and counts no connection per client. This
subclass, one instance per connection like its parent, adds:

- the head (request line and headers) is counted as it arrives, before the parser buffers it:
  past ``max_header_bytes`` the client gets 431 and the connection is closed; more than
  ``max_headers`` fields is 431, a request target over ``max_url_bytes`` is 414;
- a head must arrive within ``header_timeout`` of the connection opening or its first byte, a body
  within ``body_timeout`` of its head: else 408 (a connection that sent nothing is just closed);
- a connection from an address that already has ``max_connections_per_client`` open ones is
  closed at once (trusted proxies are exempt); a connection past ``max_connections`` in total is
  answered 503 with ``Retry-After`` for anything but the liveness path, and closed;
- every refusal is the usual JSON error envelope, with ``Connection: close``.

The idle keep-alive bound is uvicorn's own ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import logging
from asyncio import TimerHandle
from collections import Counter
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from core.errors import ErrorKind

from . import header_checks
from .bounds import Bounds
from .envelope import envelope, kind_for_status

log = logging.getLogger("keel.http")

RETRY_AFTER_SECONDS = 1
LINGER_SECONDS = 2.0
"""After a refusal, how long what the client still sends is read and dropped before the connection
closes: closing with unread data would reset the connection and lose the refusal on its way."""


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request that is being refused."""


class ClientConnections:
    """Open connections per client address, shared by every connection of one server."""

    def __init__(self) -> None:
        self.by_host: Counter[str] = Counter()

    def add(self, host: str) -> None:
        self.by_host[host] += 1

    def remove(self, host: str) -> None:
        left = self.by_host[host] - 1
        if left > 0:
            self.by_host[host] = left
        else:
            del self.by_host[host]


def refusal(status: int, message: str) -> bytes:
    """A complete HTTP/1.1 response refusing a request, closing the connection."""
    kind = ErrorKind.UNAVAILABLE if status == 503 else kind_for_status(status)
    body = envelope(kind, message, None)
    head = [
        STATUS_LINE[status],
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"connection: close\r\n",
    ]
    if status == 503:
        head.append(b"retry-after: " + str(RETRY_AFTER_SECONDS).encode() + b"\r\n")
    return b"".join([*head, b"\r\n", body])


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    bounds: ClassVar[Bounds] = Bounds()
    clients: ClassVar[ClientConnections] = ClientConnections()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._refusal: tuple[int, str] | None = None
        self._head_timer: TimerHandle | None = None
        self._body_timer: TimerHandle | None = None
        self._counted_host: str | None = None
        self._over_capacity = False
        self._lingering = False

    # -- connection ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        bounds = self.bounds
        host = self.client[0] if self.client else None
        if host is not None and not bounds.is_trusted_proxy(host):
            if self.clients.by_host[host] >= bounds.max_connections_per_client:
                log.warning(
                    "closed a connection from %s: it already has %d open (HTTP_MAX_CONNECTIONS_PER_CLIENT)",
                    host,
                    bounds.max_connections_per_client,
                )
                transport.close()
                return
            self.clients.add(host)
            self._counted_host = host
        if len(self.connections) > bounds.max_connections:
            self._over_capacity = True
        self._head_timer = self.loop.call_later(bounds.header_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted_host is not None:
            self.clients.remove(self._counted_host)
            self._counted_host = None
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        self._unset_keepalive_if_required()
        limit = self.bounds.max_header_bytes
        if self._in_head and data:
            size = self._head_bytes + len(data)
            if size <= limit and not self.transport.is_closing():
                # The usual case, what the loop below does in one step: all of ``data`` fits in
                # what is left of the head's allowance, so it is fed as it is (``_feed``, inlined).
                self._head_bytes = size
                try:
                    self.parser.feed_data(data)
                except (httptools.HttpParserUpgrade, httptools.HttpParserError) as exc:
                    self._parse_stopped(exc)
                    return
                if self._head_bytes or not self._in_head:
                    self._arm_timers()  # (a request that came whole, the usual case, needs none)
                return
        while data and not self.transport.is_closing():
            if self._in_head:
                room = limit - self._head_bytes
                if room <= 0:
                    self._refuse(
                        431, f"the request head is larger than {limit} bytes (HTTP_MAX_HEADER_BYTES)"
                    )
                    return
                if len(data) <= room:
                    piece, data = data, b""
                else:
                    piece, data = data[:room], data[room:]
                self._head_bytes += len(piece)
            else:
                piece, data = data, b""
            if not self._feed(piece):
                return
        self._arm_timers()

    def _arm_timers(self) -> None:
        # Timers only for what is still on its way, so a request arriving whole (the usual case)
        # arms none: a partial head has header_timeout to complete, a partial body body_timeout.
        if self._in_head:
            if self._head_bytes and self._head_timer is None:
                self._head_timer = self.loop.call_later(self.bounds.header_timeout, self._head_timed_out)
        elif self._body_timer is None and not self.transport.is_closing():
            self._body_timer = self.loop.call_later(self.bounds.body_timeout, self._body_timed_out)

    def _feed(self, data: bytes) -> bool:
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserUpgrade, httptools.HttpParserError) as exc:
            self._parse_stopped(exc)
            return False
        return True

    def _parse_stopped(self, exc: Exception) -> None:
        """The parser stopped: an upgrade to take or refuse, a request being refused, or bad HTTP."""
        if isinstance(exc, httptools.HttpParserUpgrade):
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        elif self._refusal is not None:
            self._refuse(*self._refusal)
        else:
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)

    # -- parser callbacks ----------------------------------------------------------------------

    # The head's size is bounded as it arrives (``data_received``), so the target's length and the
    # number of fields can be checked once it is complete, without a callback per header.

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        bounds = self.bounds
        if len(self.url) > bounds.max_url_bytes:
            self._refusal = (414, f"the request target is longer than {bounds.max_url_bytes} bytes")
            raise _Refused
        if len(self.headers) > bounds.max_headers:
            self._refusal = (431, f"more than {bounds.max_headers} header fields (HTTP_MAX_HEADERS)")
            raise _Refused
        if self._over_capacity and not self._is_priority():
            self._refusal = (503, "the server is at its connection limit; retry shortly")
            raise _Refused
        HttpToolsProtocol.on_headers_complete(self)  # not super(): this runs for every request

    def on_message_complete(self) -> None:
        HttpToolsProtocol.on_message_complete(self)
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._in_head = True
        self._head_bytes = 0

    def _is_priority(self) -> bool:
        try:
            path = httptools.parse_url(self.url).path.decode("latin-1")
        except httptools.HttpParserInvalidURLError:
            return False
        return path in self.bounds.priority_paths

    # -- refusing ------------------------------------------------------------------------------

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` (unless a response is already under way) and close the connection."""
        self._refusal = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            started = cycle.response_started
            cycle.disconnected = True  # the application's receive sees a disconnect, its sends are dropped
            cycle.message_event.set()
            if started:
                self.transport.close()
                return
        if self.client:
            log.info("refused %s:%d with %d: %s", *self.client, status, message)
        self.transport.write(refusal(status, message))
        self._linger()

    def _linger(self) -> None:
        transport = self.transport
        if not transport.can_write_eof():
            transport.close()
            return
        self._cancel_timers()
        transport.write_eof()
        self._lingering = True
        self.loop.call_later(LINGER_SECONDS, transport.close)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False  # a request is being answered: close after it
            return
        if self._head_bytes == 0:
            self.transport.close()  # sent nothing at all: nothing to answer
            return
        timeout = self.bounds.header_timeout
        self._refuse(408, f"the request head did not arrive within {timeout:g} s (HTTP_HEADER_TIMEOUT)")

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        timeout = self.bounds.body_timeout
        self._refuse(408, f"the request body did not arrive within {timeout:g} s (HTTP_BODY_TIMEOUT)")

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None


def bounded_protocol(bounds: Bounds) -> type[BoundedHttpToolsProtocol]:
    """A protocol class for one server: its bounds and its own per-client connection counts
    (and uvicorn's header checks answered from memory, ``header_checks.py``)."""
    header_checks.install()
    return type(
        "BoundedHttpToolsProtocol",
        (BoundedHttpToolsProtocol,),
        {"bounds": bounds, "clients": ClientConnections()},
    )
