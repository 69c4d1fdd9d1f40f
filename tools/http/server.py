"""uvicorn, run inside the kernel's event loop and stopped by the kernel, not by signals.

``KeelServer`` is a ``uvicorn.Server`` that never installs signal handlers (the kernel owns
SIGINT/SIGTERM and sets the stop event) and reports when it is listening. The listening socket
is bound here rather than by uvicorn, so a port that cannot be bound is an ``OSError`` we can
report instead of uvicorn's ``sys.exit``, and ``PORT=0`` tells us the port the system picked.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import Send

from core.errors import ErrorKind

from .envelope import envelope

try:
    import httptools  # noqa: F401
except ImportError:  # pragma: no cover - uvicorn[standard] installs it
    HTTP_PROTOCOL = "h11"
else:
    HTTP_PROTOCOL = "httptools"


class KeelServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


def bind_socket(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) TCP socket for ``host:port``; ``port`` 0 picks a free one."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` a client on this machine can use to reach ``sock``."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a ``HOST`` value) can only be reached from this machine.

    ``localhost`` and the loopback addresses (127.0.0.0/8, ``::1``, and 127.x written as an
    IPv4-mapped IPv6 address) are; any other name or address, ``0.0.0.0`` included, is not.
    """
    name = host.strip().removeprefix("[").removesuffix("]").lower()
    if name in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


async def answer_cut_off(send: Send, request_id: str | None) -> None:
    """Answer a request cut off by the end of the shutdown grace period: 503 with ``Retry-After``.

    When the grace period runs out uvicorn cancels the requests still running, and answers the ones
    that had not started responding with a 500. The outermost layer (``RequestIdMiddleware``, told
    by ``serve`` when the server is stopping) tells a cancellation by shutdown from any other and
    calls this instead: another instance, or this one restarted, can take the request.
    """
    body = envelope(
        ErrorKind.UNAVAILABLE,
        "the server is shutting down and could not finish this request; retry it",
        request_id,
    )
    try:
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", b"1"),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
    except RuntimeError:  # the response had already started: nothing else can be said
        raise asyncio.CancelledError from None
