"""Server-sent events: a plugin's async iterator of dicts, written as a ``text/event-stream``.

``stream(data, context)`` returns an async iterator: an ``async def`` generator, or a function
(sync or async) returning one; a plain function is called on the event loop, so it must be quick.
Each item is a dict: ``data`` (required: a string is sent as it is, anything else as compact JSON;
a multi-line string becomes several ``data:`` lines), and optional ``event`` (str), ``id`` (str) and
``retry`` (int, milliseconds). ``context`` is the same as for JSON endpoints plus
``last_event_id``, taken from the ``Last-Event-ID`` header or the ``?last_event_id=`` query
parameter (``None`` when absent).

A fan-out serving many clients may give its iterator a ``batches()`` method returning an async
iterator of lists of such dicts; the writer then reads that instead, taking each list as one step
(the events of a list go out back to back). A list handed to several clients as the same object
is encoded once for all of them, so a line costs each client nothing of its own (the log stream).

To refuse a stream with a status (404, 403 ...), raise from ``stream`` itself, before it returns
the iterator: that is answered with the usual error envelope. Once the response has started, an
exception from the iterator ends the stream with one ``event: error`` whose data is the envelope
(a bug is logged with the request id and described generically, as for a 500).

The writer sends a ``: keep-alive`` comment when nothing was sent for ``heartbeat`` seconds (so
proxies keep the connection), and stops promptly — closing the iterator, which runs its
``finally`` blocks — when the client disconnects, when the server begins shutting down (an open
stream never holds uvicorn's graceful shutdown for its whole grace period), and when its route is
removed or replaced (its plugin was unloaded or reloaded; an ``EventSource`` then reconnects to the
new one by itself).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from pydantic_core import to_json
from starlette.types import ASGIApp, Receive, Scope, Send

from core.context import current_identity_var
from core.errors import TooManyRequestsError

from .auth import AuthGate
from .endpoint import EndpointSpec, make_request_reader
from .envelope import problem_for
from .request_id import REQUEST_ID_KEY, new_request_id
from .sse_writer import CLOSED, GONE, ClientWriter, pull
from .sse_writer import HEARTBEAT as HEARTBEAT

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
DEFAULT_FLUSH_SECONDS = 0.01
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def format_event(item: Mapping[str, Any]) -> bytes:
    """One event in the wire format; raises ``TypeError``/``ValueError`` for a malformed item."""
    if not isinstance(item, Mapping):
        raise TypeError(f"a server-sent event must be a dict, got {type(item).__name__}")
    if "data" not in item:
        raise ValueError("a server-sent event needs a 'data' key")
    lines: list[str] = []
    for field in ("id", "event"):
        value = item.get(field)
        if value is None:
            continue
        text = str(value)
        if _LINE_BREAK.search(text) or "\0" in text:
            raise ValueError(f"a server-sent event's {field!r} must be one line, got {text!r}")
        lines.append(f"{field}: {text}")
    retry = item.get("retry")
    if retry is not None:
        if not isinstance(retry, int) or isinstance(retry, bool) or retry < 0:
            raise ValueError(f"a server-sent event's 'retry' must be a non-negative int, got {retry!r}")
        lines.append(f"retry: {retry}")
    data = item["data"]
    text = data if isinstance(data, str) else to_json(data).decode()
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(text))
    return ("\n".join(lines) + "\n\n").encode()


class SharedEncoder:
    """``format_event`` that encodes an event object once however many clients stream it.

    A fan-out (the log stream) hands the same dict to every client; the bytes of the last
    ``size`` distinct objects are kept, keyed by identity and holding the object so its id is not
    reused while kept. An event must not be changed after it was yielded. A list (a batch from an
    iterator's ``batches()``) is its events back to back, kept as one object too.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.kept: dict[int, tuple[Any, bytes]] = {}

    def __call__(self, item: Any) -> bytes:
        key = id(item)
        found = self.kept.get(key)
        if found is not None and found[0] is item:
            return found[1]
        chunk = b"".join([self(event) for event in item]) if type(item) is list else format_event(item)
        kept = self.kept
        if len(kept) >= self.size:
            del kept[next(iter(kept))]
        kept[key] = (item, chunk)
        return chunk


shared_encoder = SharedEncoder()


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _open(
    stream: Callable[..., Any], data: dict[str, Any], context: dict[str, Any]
) -> AsyncIterator[Any]:
    iterator = stream(data, context)
    if inspect.isawaitable(iterator):
        iterator = await iterator
    if not hasattr(iterator, "__anext__"):
        raise TypeError(f"an SSE stream must return an async iterator, got {type(iterator).__name__}")
    return iterator  # type: ignore[no-any-return]


class Closer:
    """A signal that ends open streams; ``close()`` may be called from any thread."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self) -> None:
        """Called on the event loop by each stream that starts waiting on the signal."""
        self._loop = asyncio.get_running_loop()

    def close(self) -> None:
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            self.event.set()
            return
        try:
            loop.call_soon_threadsafe(self.event.set)
        except RuntimeError:
            pass  # that loop is closed: no stream is left to end

    def reset(self) -> None:
        self.event.clear()


class StreamTracker:
    """The open streams of one http tool, and the signal that ends them all at shutdown."""

    def __init__(self) -> None:
        self.closing = Closer()
        self.open = 0
        self.per_client_limit = 10
        self.by_client: Counter[str] = Counter()

    def claim(self, client: str | None) -> str | None:
        """Count one more stream for ``client``; a 429 when it already has ``per_client_limit``."""
        if client is None:
            return None
        if self.by_client[client] >= self.per_client_limit:
            raise TooManyRequestsError(
                f"this client already has {self.per_client_limit} event streams open "
                "(HTTP_MAX_STREAMS_PER_CLIENT); close one first",
                retry_after=5,
            )
        self.by_client[client] += 1
        return client

    def release(self, client: str | None) -> None:
        if client is None:
            return
        left = self.by_client[client] - 1
        if left > 0:
            self.by_client[client] = left
        else:
            del self.by_client[client]


def make_sse_app(
    spec: EndpointSpec,
    gate: AuthGate,
    max_body: int,
    tracker: StreamTracker,
    route_closer: Closer,
    heartbeat: Callable[[], float],
    flush: Callable[[], float] = lambda: DEFAULT_FLUSH_SECONDS,
) -> ASGIApp:
    """The ASGI callable of one event-stream route; ``route_closer`` ends its streams when it is removed."""
    read = make_request_reader(spec, gate, max_body)
    stream = spec.handler
    identity = spec.identity
    where = f"SSE {spec.path} ({identity})"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request_id = scope.get(REQUEST_ID_KEY) or new_request_id()
        token = current_identity_var.set(identity)
        claimed: str | None = None
        try:
            try:
                data, context = await read(scope, receive, request_id)
                claimed = tracker.claim(context["client"])
                last_event_id = context["headers"].get("last-event-id") or context["query"].get(
                    "last_event_id"
                )
                context["last_event_id"] = last_event_id if isinstance(last_event_id, str) else None
                iterator = await _open(stream, data, context)
            except Exception as exc:
                status, body, headers = problem_for(exc, request_id, where)
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            *headers,
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            await send({"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)})
            tracker.open += 1
            try:
                closers = (tracker.closing, route_closer)
                await _pump(iterator, receive, send, closers, heartbeat(), request_id, where, flush())
            finally:
                tracker.open -= 1
        finally:
            tracker.release(claimed)
            current_identity_var.reset(token)

    return app


async def _pump(
    iterator: AsyncIterator[Any],
    receive: Receive,
    send: Send,
    closers: tuple[Closer, Closer],
    heartbeat: float,
    request_id: str,
    where: str,
    flush: float = DEFAULT_FLUSH_SECONDS,
) -> None:
    """Stream ``iterator`` through one :class:`ClientWriter` (see ``sse_writer.py``)."""
    loop = asyncio.get_running_loop()
    writer = ClientWriter(send, heartbeat, flush)

    def on_error(exc: Exception) -> bytes:
        _, body, _ = problem_for(exc, request_id, where)
        return format_event({"event": "error", "data": body.decode()})

    puller = loop.create_task(pull(iterator, writer, shared_encoder, on_error))
    disconnected = loop.create_task(_wait_for_disconnect(receive))
    disconnected.add_done_callback(lambda _: writer.stop(GONE))
    for closer in closers:
        closer.attach()
    closing = [loop.create_task(closer.event.wait()) for closer in closers]
    for watcher in closing:
        watcher.add_done_callback(lambda _: writer.stop(CLOSED))
    running = loop.create_task(writer.run())  # its own task: a wake-up resumes the writer alone
    try:
        await running
    finally:
        helpers: tuple[asyncio.Task[Any], ...] = (running, puller, disconnected, *closing)
        for task in helpers:
            task.cancel()
        await asyncio.wait(helpers)
        for task in helpers:  # retrieve what ended them, so nothing is reported as never retrieved
            if not task.cancelled():
                task.exception()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception as exc:
                problem_for(exc, request_id, f"{where} closing")
        if writer.stopped != GONE:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
