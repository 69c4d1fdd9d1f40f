"""The ``http`` tool: plugins' endpoints as a FastAPI app, served by uvicorn inside the kernel.

Plugins call ``add_endpoint`` / ``add_sse_endpoint`` from ``on_boot``; the kernel then runs
``serve(stop)``. What a request becomes (``data``, ``context``), what a handler may return and how
errors are answered is described in ``endpoint.py``, ``sse.py`` and ``envelope.py``; who may call
an endpoint in ``auth.py``. In short:

- every response carries ``X-Request-ID`` (``request_id.py``), and every failure the envelope
  ``{"error": {"kind", "message", "request_id"}}``;
- ``auth=False | True | "admin"``. With no token validator installed (the auth tool is off),
  ``auth=True`` endpoints answer 503 and ``auth="admin"`` endpoints are open — the system
  endpoints stay readable on a single machine; once a validator is installed they need a token
  whose claims have ``admin: true`` or ``"admin"`` in ``roles``. ``serve`` logs a warning when
  such open admin endpoints listen on a ``HOST`` other than a loopback address;
- each route belongs to the plugin that registered it (the kernel's ``current_plugin_var``):
  ``release_owner`` removes them, another plugin registering the same method and path is a
  ``ValueError`` naming both, and the same plugin registering it again replaces it (reload);
- a plugin's new version, booting under a staging owner while the old one serves
  (``core.reloader``), registers routes and auth hooks that wait, unseen, until
  ``promote_owner`` swaps them for the old version's in one assignment of the route list (a
  request matches either every old route of the plugin or every new one, never neither);
  removed routes still serving requests are kept until ``drain_owner`` has seen them finish;
- ``add_page`` serves fixed non-JSON content (an HTML page and its assets, ``page.py``);
- OpenAPI at ``/openapi.json`` documents every route with its models and tags; ``/docs`` (Swagger
  UI) and ``/redoc`` show it with assets Keel serves itself (``docs.py``), so they work offline.

Configuration (read in ``setup``): ``HOST`` (127.0.0.1), ``PORT`` (8000; 0 picks a free port, and
the ``serving on http://host:port`` log line says which), ``SHUTDOWN_GRACE_SECONDS`` (10: how long
in-flight requests may take to finish after SIGTERM), ``SSE_HEARTBEAT_SECONDS`` (15),
``SSE_FLUSH_SECONDS`` (0.01: how long an event stream gathers events into one write),
``HTTP_ACCESS_LOG`` (off), ``HTTP_MAX_BODY_BYTES`` (1 MiB; larger bodies are a 413), and the
bounds on what a client controls (head size, field count, target length, slow heads and bodies,
idle keep-alive, connections in all and per client, event streams per client) and which proxies'
forwarded headers are believed: ``bounds.py`` lists them, ``protocol.py`` enforces them.
A request cut off by the end of the shutdown grace period is a 503 with ``Retry-After``.

Requests for the endpoints and pages registered here skip FastAPI's middleware and router: the
dispatcher (``dispatch.py``) in front of the FastAPI app matches them by FastAPI's own rules and
serves them directly, and hands everything else (the docs, event streams, unknown paths) to FastAPI.
The layers a request crosses: ``RequestIdMiddleware`` (which also answers a request cut off by the
shutdown), the server spans once telemetry is on (``server_spans.py``), the dispatcher, then the
route or FastAPI.

uvicorn runs with httptools when installed, without lifespan events (the kernel owns the
lifecycle) and without its own signal handlers (the kernel sets ``stop`` on SIGINT/SIGTERM).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import uvicorn
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from pydantic_core import to_json
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from core.base_tool import BaseTool
from core.context import current_plugin_var, identity_of
from core.errors import ErrorKind, RequestError, ToolUnavailableError
from core.registry import ToolStatus
from core.reloader import base_owner, is_staging
from core.settings import env_duration, env_flag, env_int, env_str

from .auth import ADMIN, AdminCheck, AuthGate, AuthMode, Validator, bearer_token, check_mode, is_admin
from .bounds import Bounds, load_bounds
from .dispatch import Dispatcher
from .docs import docs_routes
from .endpoint import EndpointSpec, make_endpoint
from .envelope import envelope, problem_for
from .openapi import document_keel
from .page import build_page, make_page_app
from .protocol import bounded_protocol
from .request_id import REQUEST_ID_KEY, RequestIdMiddleware
from .route_metrics import RouteMetrics
from .route_order import check_owner, ordered, shadowing
from .routes import KeelRoute
from .server import HTTP_PROTOCOL, KeelServer, bind_socket, is_loopback, url_of
from .sse import DEFAULT_FLUSH_SECONDS, Closer, StreamTracker, make_sse_app

try:
    import uvloop
except ImportError:  # pragma: no cover - uvicorn[standard] installs it
    uvloop = None  # type: ignore[assignment]

log = logging.getLogger("keel.http")

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
DEFAULT_MAX_BODY = 1024 * 1024


class HttpTool(BaseTool):
    """HTTP endpoints and server-sent-event streams for plugins, served by uvicorn."""

    name = "http"
    loop_factory: ClassVar[Callable[[], asyncio.AbstractEventLoop] | None] = (
        uvloop.new_event_loop if uvloop is not None else None
    )

    def __init__(self) -> None:
        self.app = FastAPI(
            title="Keel",
            description="Endpoints registered by Keel's plugins.",
            docs_url=None,
            redoc_url=None,
            **_native_telemetry_off(),
        )
        self.app.router.routes.extend(docs_routes())
        generate = self.app.openapi

        def openapi() -> dict[str, Any]:
            if self.app.openapi_schema is None:
                schema = generate()
                with self._lock:
                    specs = {(r.spec.method, r.spec.path): r.spec for r in self._routes.values()}
                document_keel(schema, specs, self._gate.validator is not None)
            return self.app.openapi_schema  # type: ignore[return-value]

        self.app.openapi = openapi  # type: ignore[method-assign]
        _install_error_handlers(self.app)
        self.dispatcher = Dispatcher(self.app)
        self.asgi = RequestIdMiddleware(self.dispatcher)
        self.base_url: str | None = None
        self.host = "127.0.0.1"
        self.port = 8000
        self.grace = 10.0
        self.heartbeat = 15.0
        self.sse_flush = DEFAULT_FLUSH_SECONDS
        self.access_log = False
        self.max_body = DEFAULT_MAX_BODY
        self.bounds = Bounds()
        self._gate = AuthGate()
        self._streams = StreamTracker()
        self.route_metrics = RouteMetrics()
        self._routes: dict[tuple[str, str], KeelRoute] = {}
        self._staged: dict[str, dict[tuple[str, str], KeelRoute]] = {}
        self._staged_gate: dict[str, dict[str, Any]] = {}
        self._retired: dict[str, list[KeelRoute]] = {}
        self._shadowing: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._listening = asyncio.Event()
        self._serve_error: BaseException | None = None

    async def setup(self) -> None:
        self.host = env_str("HOST", "127.0.0.1")
        self.port = env_int("PORT", 8000, minimum=0, maximum=65535)
        self.grace = env_duration("SHUTDOWN_GRACE_SECONDS", 10.0)
        self.heartbeat = env_duration("SSE_HEARTBEAT_SECONDS", 15.0, positive=True)
        self.sse_flush = env_duration("SSE_FLUSH_SECONDS", DEFAULT_FLUSH_SECONDS)
        self.access_log = env_flag("HTTP_ACCESS_LOG")
        self.max_body = env_int("HTTP_MAX_BODY_BYTES", self.max_body, minimum=0, unit="bytes")
        self.bounds = load_bounds()
        self._streams.per_client_limit = self.bounds.max_streams_per_client

    # -- registering endpoints -----------------------------------------------------------------

    def add_endpoint(
        self,
        path: str,
        method: str,
        handler: Callable[[dict[str, Any], dict[str, Any]], Any],
        *,
        request_model: type[BaseModel] | None = None,
        response_model: Any = None,
        tags: list[str] | None = None,
        auth: AuthMode = False,
        status_code: int = 200,
        query_model: type[BaseModel] | None = None,
    ) -> None:
        """Serve ``handler(data, context)`` (sync or async) at ``method path``; it returns the JSON body."""
        method = method.upper()
        if method not in METHODS:
            raise ValueError(f"unsupported HTTP method {method!r}; use one of {sorted(METHODS)}")
        if request_model is not None and not (
            isinstance(request_model, type) and issubclass(request_model, BaseModel)
        ):
            raise TypeError(f"request_model must be a pydantic model class, got {request_model!r}")
        _check_model("query_model", query_model)
        if not isinstance(status_code, int) or not 100 <= status_code <= 599:
            raise ValueError(f"status_code must be an HTTP status between 100 and 599, got {status_code!r}")
        spec = self._spec(path, method, handler, tags, auth, sse=False)
        spec = dataclasses.replace(
            spec,
            request_model=request_model,
            response_model=response_model,
            status_code=status_code,
            query_model=query_model,
        )
        app, status_app = make_endpoint(spec, self._gate, self.max_body)
        self._register(KeelRoute(spec, app, status_app=status_app))

    def add_sse_endpoint(
        self,
        path: str,
        stream: Callable[[dict[str, Any], dict[str, Any]], Any],
        *,
        tags: list[str] | None = None,
        auth: AuthMode = False,
        query_model: type[BaseModel] | None = None,
    ) -> None:
        """Serve ``GET path`` as server-sent events from ``stream(data, context)``'s async iterator."""
        _check_model("query_model", query_model)
        spec = dataclasses.replace(
            self._spec(path, "GET", stream, tags, auth, sse=True), query_model=query_model
        )
        closer = Closer()
        app = make_sse_app(
            spec,
            self._gate,
            self.max_body,
            self._streams,
            closer,
            lambda: self.heartbeat,
            lambda: self.sse_flush,
        )
        self._register(KeelRoute(spec, app, closer))

    def add_page(
        self,
        path: str,
        content: bytes | str,
        media_type: str = "text/html; charset=utf-8",
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Serve fixed ``content`` (bytes, or str as UTF-8) at ``GET path``: a page, script or stylesheet."""
        app = make_page_app(build_page(content, media_type, headers))
        spec = self._spec(path, "GET", app, None, False, sse=False)
        route = KeelRoute(dataclasses.replace(spec, identity=f"page {path}"), app)
        route.methods = {"GET", "HEAD"}
        route.include_in_schema = False  # a page is not part of the API
        self._register(route)

    def get_endpoints(self) -> list[dict[str, Any]]:
        """Every registered endpoint: method, path, owner, identity, auth, tags, sse."""
        with self._lock:
            specs = [route.spec for route in self._routes.values()]
        return [
            {
                "method": s.method,
                "path": s.path,
                "owner": s.owner,
                "identity": s.identity,
                "auth": s.auth,
                "tags": list(s.tags),
                "sse": s.sse,
            }
            for s in specs
        ]

    def get_route_metrics(self) -> list[dict[str, Any]]:
        """Per route and method: requests, rate, p50/p95/p99 ms and counts by status (this process)."""
        return self.route_metrics.snapshot()

    async def caller_is_admin(self, context: dict[str, Any]) -> bool:
        """Whether the caller of an open endpoint may see what an ``auth="admin"`` one shows: always
        while authentication is not configured, else only with a valid admin bearer token."""
        if self._gate.validator is None:
            return True
        token = bearer_token(context.get("headers") or {})
        if token is None:
            return False
        try:
            await self._gate.identify(ADMIN, token)
        except RequestError:
            return False
        return True

    def json_response(
        self, body: Any, *, status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        """A JSON response with another status than the endpoint's (return it from a handler)."""
        return Response(
            to_json(body), status_code=status_code, headers=dict(headers or {}), media_type="application/json"
        )

    def release_owner(self, owner: str) -> None:
        """Remove every route (and the auth hooks) plugin ``owner`` registered."""
        with self._lock:
            self._staged.pop(owner, None)
            self._staged_gate.pop(owner, None)
            gone = [key for key, route in self._routes.items() if route.spec.owner == owner]
            if gone:
                removed = [self._routes.pop(key) for key in gone]
                for method, path in gone:
                    self.route_metrics.forget(method, path)
                dropped = {id(route) for route in removed}
                self.app.router.routes = [r for r in self.app.router.routes if id(r) not in dropped]
                self.app.openapi_schema = None
                self._retire(owner, removed)
            if self._gate.validator_owner == owner:
                self._gate.validator, self._gate.validator_owner = None, None
            if self._gate.admin_check_owner == owner:
                self._gate.admin_check, self._gate.admin_check_owner = is_admin, None

    def promote_owner(self, staged: str, owner: str) -> None:
        """Swap ``owner``'s routes and auth hooks for those registered under ``staged``, in one step."""
        with self._lock:
            incoming: dict[tuple[str, str], KeelRoute] = {}
            for key, route in self._staged.pop(staged, {}).items():
                holder = self._routes.get(key)
                if holder is not None and holder.spec.owner != owner:
                    log.error(
                        "%s %s is registered by %s meanwhile; %s keeps it", *key, holder.spec.owner, owner
                    )
                    continue
                route.spec = dataclasses.replace(route.spec, owner=owner)
                incoming[key] = route
            outgoing = {key: r for key, r in self._routes.items() if r.spec.owner == owner}
            # A replaced route keeps its place in the list (matching order); a new one goes last.
            replaced = {id(route): incoming[key] for key, route in outgoing.items() if key in incoming}
            dropped = {id(route) for route in outgoing.values()}
            routes = [
                replaced.get(id(r), r)
                for r in self.app.router.routes
                if id(r) not in dropped or id(r) in replaced
            ]
            routes.extend(route for key, route in incoming.items() if key not in outgoing)
            for key in outgoing:
                del self._routes[key]
            self._routes.update(incoming)
            self.app.router.routes = ordered(routes, _is_keel)  # one assignment: the swap requests see
            if incoming or outgoing:
                self.app.openapi_schema = None
            self._retire(owner, list(outgoing.values()))
            gate = self._staged_gate.pop(staged, {})
            if "validator" in gate or self._gate.validator_owner == owner:
                validator = gate.get("validator")
                self._gate.validator, self._gate.validator_owner = validator, owner if validator else None
            if "admin_check" in gate or self._gate.admin_check_owner == owner:
                check = gate.get("admin_check")
                self._gate.admin_check = check or is_admin
                self._gate.admin_check_owner = owner if check else None

    async def drain_owner(self, owner: str) -> None:
        """Return once the requests still running on ``owner``'s removed routes have finished."""
        with self._lock:
            routes = self._retired.pop(owner, [])
        for route in routes:
            await route.wait_idle()

    # -- authentication hooks ------------------------------------------------------------------

    def set_auth_validator(self, validator: Validator | None) -> None:
        """Install ``validator(token) -> claims`` (sync or async; raise to reject); ``None`` removes it."""
        if validator is not None and not callable(validator):
            raise TypeError("the auth validator must be callable")
        if self._stage_gate("validator", validator):
            return
        self._gate.validator = validator
        self._gate.validator_owner = current_plugin_var.get() if validator is not None else None
        self.app.openapi_schema = None  # which operations need a token changes with it

    def set_admin_check(self, check: AdminCheck | None) -> None:
        """Replace the rule deciding which verified claims are an admin's; ``None`` restores the default."""
        if self._stage_gate("admin_check", check):
            return
        self._gate.admin_check = check if check is not None else is_admin
        self._gate.admin_check_owner = current_plugin_var.get() if check is not None else None

    def _stage_gate(self, hook: str, value: Any) -> bool:
        """Hold an auth hook set by a version being staged; True when it was held."""
        owner = current_plugin_var.get()
        if owner is None or not is_staging(owner):
            return False
        with self._lock:
            self._staged_gate.setdefault(owner, {})[hook] = value
        return True

    # -- serving -------------------------------------------------------------------------------

    async def serve(self, stop: asyncio.Event) -> None:
        """Listen until ``stop`` is set, then let in-flight requests finish within the grace period."""
        self._listening.clear()
        self._serve_error = None
        self._streams.closing.reset()
        try:
            sock = bind_socket(self.host, self.port)
        except OSError as exc:
            message = f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc} (check HOST and PORT)"
            self._mark_dead(message)
            error = ToolUnavailableError(message)
            self._fail_listening(error)
            raise error from exc
        bounds = self.bounds
        server: KeelServer | None = None
        self.asgi.stopping = lambda: server is not None and server.should_exit
        config = uvicorn.Config(
            self.asgi,
            host=self.host,
            port=sock.getsockname()[1],
            log_config=None,
            access_log=self.access_log,
            lifespan="off",
            http=bounded_protocol(bounds) if HTTP_PROTOCOL == "httptools" else HTTP_PROTOCOL,
            h11_max_incomplete_event_size=bounds.max_header_bytes,
            timeout_keep_alive=bounds.keepalive_timeout,  # type: ignore[arg-type]  # a float works
            timeout_graceful_shutdown=self.grace,  # type: ignore[arg-type]  # a float works
            proxy_headers=bool(bounds.trusted_proxies),
            forwarded_allow_ips=bounds.trusted_proxies_raw or None,
        )
        if self.access_log:
            # uvicorn silences its access logger process-wide when a server runs without it;
            # undo that so the lines reach the root logger (and the logger tool's sinks).
            logging.getLogger("uvicorn.access").propagate = True
        server = KeelServer(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]), name="keel-http-server")
        listening = asyncio.create_task(server.listening.wait())
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait((serving, listening), return_when=asyncio.FIRST_COMPLETED)
            if listening.done():
                self.base_url = url_of(sock)
                log.info("serving on %s", self._urls_line(self.base_url))
                self._warn_if_admin_is_open()
                self._listening.set()
                await asyncio.wait((serving, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._streams.closing.close()  # open event streams end now instead of holding the drain
            server.should_exit = True
            listening.cancel()
            stopping.cancel()
            try:
                await serving
            except BaseException as exc:
                self._fail_listening(exc)
                raise
            finally:
                sock.close()
                self._fail_listening(RuntimeError("the http server stopped before it was listening"))
        log.info("http server stopped")

    def _urls_line(self, base: str) -> str:
        """``http://host:port`` (what the process kit and people look for), then where the API docs
        and every HTML page (the dashboard) are: the line a person opens their browser from."""
        shown = f"http://{_bracketed(self.host)}:{base.rsplit(':', 1)[1]}"
        links = [f"API {base}", f"docs {base}/docs"]
        for endpoint in sorted(self.get_endpoints(), key=lambda e: e["path"]):
            last = endpoint["path"].rstrip("/").rsplit("/", 1)[-1]
            if str(endpoint["identity"]).startswith("page ") and "." not in last:
                label = str(endpoint["owner"] or "page").split(".", 1)[0]
                links.append(f"{label} {base}{endpoint['path']}")
        return f"{shown} ({', '.join(links)})"

    async def wait_until_serving(self) -> str:
        """The base URL (``http://host:port``) once the server listens; raises if it could not start."""
        await self._listening.wait()
        if self._serve_error is not None:
            raise self._serve_error
        if self.base_url is None:  # pragma: no cover - listening is only set with a base URL
            raise RuntimeError("the http server is listening but has no base URL")
        return self.base_url

    @property
    def open_streams(self) -> int:
        """How many server-sent-event responses are streaming now."""
        return self._streams.open

    async def shutdown(self) -> None:
        self._streams.closing.close()

    async def on_instrument(self, tracer_provider: Any, meter_provider: Any = None) -> None:
        """Trace every request as a SERVER span and measure its duration
        (:mod:`tools.http.server_spans`, the stable HTTP semantic conventions)."""
        from .server_spans import ServerSpans

        # In front of the dispatcher, so requests served by Keel's fast path and by FastAPI are
        # traced alike (and, as before, inside the request-id layer).
        self.asgi.app = ServerSpans(
            self.asgi.app, tracer_provider=tracer_provider, meter_provider=meter_provider
        )

    # -- internals -----------------------------------------------------------------------------

    def _spec(
        self,
        path: str,
        method: str,
        handler: Callable[..., Any],
        tags: list[str] | None,
        auth: object,
        *,
        sse: bool,
    ) -> EndpointSpec:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"an endpoint path must start with '/', got {path!r}")
        if not callable(handler):
            raise TypeError(f"the handler for {method} {path} must be callable, got {handler!r}")
        return EndpointSpec(
            path=path,
            method=method,
            handler=handler,
            identity=identity_of(handler),
            owner=current_plugin_var.get(),
            tags=tuple(tags or ()),
            auth=check_mode(auth),
            sse=sse,
        )

    def _register(self, route: KeelRoute) -> None:
        route.metrics = self.route_metrics
        spec = route.spec
        key = (spec.method, spec.path)
        check_owner(spec.path, base_owner(spec.owner))
        with self._lock:
            existing = self._routes.get(key)
            others = [r for k, r in self._routes.items() if k != key]
            notes = shadowing(route, others)
            if is_staging(spec.owner):
                # A new version being staged: it may take over its old version's routes, and its
                # routes wait for promote_owner.
                if existing is not None and existing.spec.owner != base_owner(spec.owner):
                    holder = existing.spec.owner or "no plugin"
                    raise ValueError(
                        f"{spec.method} {spec.path} is already registered by {holder}; "
                        f"{base_owner(spec.owner)} cannot register it too"
                    )
                self._staged.setdefault(spec.owner or "", {})[key] = route
                return
            if existing is not None and existing.spec.owner != spec.owner:
                holder, newcomer = existing.spec.owner or "no plugin", spec.owner or "no plugin"
                raise ValueError(
                    f"{spec.method} {spec.path} is already registered by {holder}; "
                    f"{newcomer} cannot register it too"
                )
            routes = [r for r in self.app.router.routes if r is not existing]
            routes.append(route)
            # A new list: a request being matched concurrently never sees it change.
            self.app.router.routes = ordered(routes, _is_keel)
            self._routes[key] = route
            self.app.openapi_schema = None
            if notes:
                self._note_shadowing(notes)
        if existing is not None and existing.closer is not None:
            existing.closer.close()

    def _note_shadowing(self, notes: list[dict[str, Any]]) -> None:
        """Say in the dump (``kernel.capabilities.http_route_order``) which routes were ordered."""
        for note in notes:
            log.warning(
                "route order: %s is served before %s, which would hide it",
                note["served_first"],
                note["before"],
            )
        live = {f"{m} {p}" for m, p in self._routes}
        kept = [n for n in self._shadowing if n["served_first"] in live and n["before"] in live]
        self._shadowing = kept + notes
        registry = getattr(self, "kernel_registry", None)
        if registry is not None:
            registry.set_capability("http_route_order", list(self._shadowing))

    def _retire(self, owner: str, removed: list[KeelRoute]) -> None:
        """End the removed routes' event streams; keep those still serving for ``drain_owner``."""
        for route in removed:
            if route.closer is not None:
                route.closer.close()
        busy = [route for route in removed if route.in_flight]
        for name in list(self._retired):  # forget routes that finished without being waited for
            self._retired[name] = [route for route in self._retired[name] if route.in_flight]
            if not self._retired[name]:
                del self._retired[name]
        if busy:
            self._retired.setdefault(owner, []).extend(busy)

    def _warn_if_admin_is_open(self) -> None:
        """Say so when admin endpoints answer anyone (no validator) on an address others can reach."""
        if self._gate.validator is not None or is_loopback(self.host):
            return
        with self._lock:
            admin = sorted(
                f"{r.spec.method} {r.spec.path}" for r in self._routes.values() if r.spec.auth == ADMIN
            )
        if not admin:
            return
        log.warning(
            "HOST=%s is not a loopback address and no token validator is installed, so the %d admin "
            "(system) endpoints are OPEN to anyone who can reach this port: %s. Set AUTH_SECRET_KEY "
            "to turn the auth tool on, or listen on HOST=127.0.0.1",
            self.host,
            len(admin),
            ", ".join(admin),
        )

    def _fail_listening(self, error: BaseException) -> None:
        if not self._listening.is_set():
            self._serve_error = error
            self._listening.set()

    def _mark_dead(self, message: str) -> None:
        registry = getattr(self, "kernel_registry", None)
        if registry is not None:
            registry.update_tool_status(self.name, ToolStatus.DEAD, message)


def _check_model(what: str, model: object) -> None:
    if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{what} must be a pydantic model class, got {model!r}")


def _is_keel(route: object) -> bool:
    return isinstance(route, KeelRoute)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# -- the envelope for what never reaches a Keel route ---------------------------------------------

_BODYLESS = frozenset({204, 304})


def _native_telemetry_off() -> dict[str, Any]:
    """Recent FastAPI releases trace every request through the *global* OpenTelemetry providers on
    their own. Keel's spans come from the telemetry tool (``on_instrument`` below), configured and
    shut down with the service; FastAPI's own would duplicate them, and keep using a provider after
    the telemetry tool has shut it down."""
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}


def _install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HTTPException, _http_exception)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected_error)


def _answer(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Response:
    if status in _BODYLESS or status < 200:
        return Response(status_code=status, headers=dict(headers or {}))
    return Response(body, status_code=status, headers=dict(headers or {}), media_type="application/json")


async def _http_exception(request: Request, exc: HTTPException) -> Response:
    method, path = request.method, request.url.path
    message = exc.detail
    if exc.status_code == 404 and message == "Not Found":
        message = f"no route matches {method} {path}"
    elif exc.status_code == 405 and message == "Method Not Allowed":
        allowed = (exc.headers or {}).get("Allow")
        message = f"{method} is not allowed on {path}" + (f"; allowed: {allowed}" if allowed else "")
    status, body, _ = problem_for(
        HTTPException(exc.status_code, message), request.scope.get(REQUEST_ID_KEY), ""
    )
    return _answer(status, body, exc.headers)


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    fields = [
        {
            "field": ".".join(str(p) for p in error["loc"][1:]) or str(error["loc"][0]),
            "location": str(error["loc"][0]) if error["loc"] else "request",
            "message": error["msg"],
            "type": error["type"],
        }
        for error in exc.errors()
    ]
    names = ", ".join(f["field"] for f in fields)
    body = envelope(ErrorKind.INVALID, f"invalid request: {names}", request.scope.get(REQUEST_ID_KEY), fields)
    return _answer(422, body)


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    status, body, headers = problem_for(
        exc, request.scope.get(REQUEST_ID_KEY), f"{request.method} {request.url.path}"
    )
    return _answer(status, body, {k.decode("latin-1"): v.decode("latin-1") for k, v in headers})
