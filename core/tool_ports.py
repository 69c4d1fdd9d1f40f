"""What a plugin may call on each injected tool, as Protocols a type checker can hold it to.

A plugin receives its tools by constructor parameter name, so without these every tool is ``Any``
and a misspelt method or a missing ``await`` is found only when the line runs. Annotating the
parameters with these ports::

    from core.tool_ports import DbPort, HttpPort

    class Notes(BasePlugin):
        def __init__(self, db: DbPort, http: HttpPort) -> None: ...

lets ``mypy --strict`` check the plugin without importing any tool (``core`` knows no tool; a tool
satisfies its port structurally, and ``tests/core/test_tool_ports.py`` checks every tool against its
port, statically and at run time).

The ports list the plugin-facing surface only: set-up, shutdown and the kernel's ownership hooks
(``release_owner``, ``promote_owner``) are the kernel's business and stay off them. Types that belong
to a tool's third-party library (a pydantic model class, a Starlette response) are ``Any`` here,
because naming them would import the library into ``core``. The model, store and checkpoint ports
are the agent kernel's own (:mod:`core.contracts.ports`); they are re-exported so one import serves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from core.contracts.ports import CheckpointPort, LLMPort, StorePort

if TYPE_CHECKING:
    from core.agents.cognition import Cognition

__all__ = [
    "AuthPort",
    "CheckpointPort",
    "ClusterPort",
    "CodingCliPort",
    "ContextPort",
    "DbPort",
    "EventBusPort",
    "EventHandler",
    "HttpHandler",
    "HttpPort",
    "LLMPort",
    "JobHandler",
    "LoggerPort",
    "PluginWatcherPort",
    "RegistryPort",
    "SchedulerPort",
    "StorePort",
    "TelemetryPort",
]

HttpHandler = Callable[[dict[str, Any], dict[str, Any]], Any]
"""``handler(data, context)``, sync or async; what it returns is the JSON body."""

EventHandler = Callable[[Any], Awaitable[Any] | Any]
"""``handler(event)``, sync or async; ``event.payload`` is what was published."""

JobHandler = Callable[[dict[str, Any]], Any]
"""``handler(job)``, sync or async; ``job`` has ``id``, ``name``, ``payload``, ``due_at``, ``attempt``."""


@runtime_checkable
class DbPort(Protocol):
    """SQL with ``$n`` placeholders, the same on SQLite and PostgreSQL (see the ``db`` tool)."""

    @property
    def dialect(self) -> str: ...
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...
    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...
    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]: ...
    async def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None: ...
    async def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


@runtime_checkable
class HttpPort(Protocol):
    """Routes a plugin serves; paths stay under the plugin's domain prefix."""

    def add_endpoint(
        self,
        path: str,
        method: str,
        handler: HttpHandler,
        *,
        request_model: Any = None,
        response_model: Any = None,
        tags: list[str] | None = None,
        auth: bool | str = False,
        status_code: int = 200,
    ) -> None: ...
    def add_sse_endpoint(
        self,
        path: str,
        stream: HttpHandler,
        *,
        tags: list[str] | None = None,
        auth: bool | str = False,
    ) -> None: ...
    def add_page(
        self,
        path: str,
        content: bytes | str,
        media_type: str = ...,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None: ...
    def get_endpoints(self) -> list[dict[str, Any]]: ...
    def json_response(
        self, body: Any, *, status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> Any: ...


@runtime_checkable
class EventBusPort(Protocol):
    """Publish/subscribe with causal parent ids; every method is a coroutine, so await it."""

    async def publish(self, name: str, payload: Any = None) -> str: ...
    async def publish_many(self, name: str, payloads: Iterable[Any]) -> list[str]: ...
    async def request(self, name: str, payload: Any = None, timeout: float = 5.0) -> Any: ...  # noqa: ASYNC109
    async def subscribe(self, name: str, handler: EventHandler, *, group: str | None = None) -> None: ...
    async def unsubscribe(self, name: str, handler: EventHandler) -> bool: ...


@runtime_checkable
class LoggerPort(Protocol):
    """Log lines attributed to the calling plugin; ``%``-style ``args`` as in :mod:`logging`."""

    def debug(self, message: str, *args: Any) -> None: ...
    def info(self, message: str, *args: Any) -> None: ...
    def warning(self, message: str, *args: Any) -> None: ...
    def error(self, message: str, *args: Any) -> None: ...
    def critical(self, message: str, *args: Any) -> None: ...
    def exception(self, message: str, *args: Any) -> None: ...


@runtime_checkable
class AuthPort(Protocol):
    """Tokens and password hashes; the async twins keep the slow hash off the event loop."""

    @property
    def configured(self) -> bool: ...
    def create_token(
        self, subject: str, claims: Mapping[str, Any] | None = None, expires_delta: timedelta | None = None
    ) -> str: ...
    def verify_token(self, token: str) -> dict[str, Any]: ...
    def hash_password(self, password: str) -> str: ...
    def verify_password(self, password: str, password_hash: str) -> bool: ...
    def needs_rehash(self, password_hash: str) -> bool: ...
    async def ahash_password(self, password: str) -> str: ...
    async def averify_password(self, password: str, password_hash: str) -> bool: ...


@runtime_checkable
class RegistryPort(Protocol):
    """Read the system dump and metrics; report a status a plugin observed."""

    def get_system_dump(self) -> dict[str, Any]: ...
    def get_metrics_summary(self) -> dict[str, dict[str, Any]]: ...
    def get_tool_status(self, name: str) -> str | None: ...
    def get_domain_metadata(self) -> dict[str, dict[str, Any]]: ...
    def set_domain_metadata(self, domain: str, key: str, value: Any) -> None: ...


@runtime_checkable
class TelemetryPort(Protocol):
    """OpenTelemetry tracer and meter (no-op objects when telemetry is off)."""

    @property
    def enabled(self) -> bool: ...
    def get_tracer(self, name: str = ..., version: str | None = None) -> Any: ...
    def get_meter(self, name: str = ..., version: str | None = None) -> Any: ...


@runtime_checkable
class SchedulerPort(Protocol):
    """Recurring schedules and durable one-shot jobs; registering is sync, the job store is async."""

    def every(
        self,
        interval: float | timedelta,
        handler: JobHandler,
        *,
        name: str | None = None,
        catch_up: str = "once",
        retries: int = 0,
    ) -> str: ...
    def cron(
        self,
        expr: str,
        handler: JobHandler,
        *,
        tz: str = "UTC",
        name: str | None = None,
        catch_up: str = "once",
        retries: int = 0,
    ) -> str: ...
    def on_job(self, name: str, handler: JobHandler) -> None: ...
    async def at(
        self,
        when: datetime | float,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        max_attempts: int | None = None,
    ) -> str: ...
    async def after(
        self,
        delay: float | timedelta,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        max_attempts: int | None = None,
    ) -> str: ...
    async def jobs(
        self, status: str | None = None, name: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]: ...
    async def job(self, job_id: str) -> dict[str, Any] | None: ...
    async def cancel(self, job_id: str) -> bool: ...
    async def rerun(self, job_id: str) -> bool: ...
    async def schedules(self) -> list[dict[str, Any]]: ...
    async def status(self) -> dict[str, Any]: ...


@runtime_checkable
class ClusterPort(Protocol):
    """The live processes of the deployment (this one alone when no Redis is shared)."""

    process_id: str

    @property
    def enabled(self) -> bool: ...
    async def members(self) -> list[dict[str, Any]]: ...
    def version_mismatches(self, members: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]: ...
    def announcement(self) -> dict[str, Any]: ...


@runtime_checkable
class CodingCliPort(Protocol):
    """Coding-agent command-line programs as cognitions an agent can run with."""

    def claude(self, **options: Any) -> Cognition: ...
    def codex(self, **options: Any) -> Cognition: ...
    def codex_session(self, thread_id: str | None = None, **options: Any) -> Cognition: ...


@runtime_checkable
class ContextPort(Protocol):
    """The ``context_manager`` tool: AI_CONTEXT.md, rewritten when what it describes changed."""

    def regenerate(self) -> bool: ...


@runtime_checkable
class PluginWatcherPort(Protocol):
    """Live reload of plugin files; a plugin or test may wait until changes are seen."""

    @property
    def watching(self) -> bool: ...
    async def wait_until_watching(self) -> None: ...
