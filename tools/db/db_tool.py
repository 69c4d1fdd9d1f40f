"""The ``db`` tool: SQL with ``$n`` placeholders on SQLite or PostgreSQL, chosen by ``DATABASE_URL``.

The contract every plugin can rely on, whichever engine runs underneath::

    count = await db.execute("UPDATE users SET name = $1 WHERE id = $2", ["Ana", 7])   # rows affected
    rows  = await db.query("SELECT id, name FROM users WHERE name = $1", ["Ana"])       # list of dicts
    row   = await db.query_one("SELECT * FROM users WHERE id = $1", [7])                # dict or None
    n     = await db.scalar("SELECT count(*) FROM users")                               # first column
    new   = await db.scalar("INSERT INTO users (name) VALUES ($1) RETURNING id", ["Bo"])
    await db.executemany("INSERT INTO tags (name) VALUES ($1)", [["a"], ["b"]])         # atomic
    async with db.transaction():      # nested blocks are SAVEPOINTs
        await db.execute(...)         # calls from this task join the block

- ``params`` is a list or tuple matching ``$1..$n`` exactly (see :mod:`tools.db.placeholders`).
- ``execute`` returns the number of rows affected (for a statement that returns rows, the number
  returned); ids come from ``RETURNING``. ``executemany`` returns nothing (PostgreSQL does not
  report per-batch counts) and is all-or-nothing.
- A transaction belongs to the task that opened it (see :mod:`tools.db.sqlite`,
  :mod:`tools.db.postgres`); ``async with db.transaction() as tx`` also gives the tool itself, so
  ``tx.execute`` and ``db.execute`` are the same call.
- Every failure is a :class:`~tools.db.errors.DatabaseError` with a closed ``kind``; an unreachable
  database is :class:`~tools.db.errors.DatabaseUnavailableError` (a ``ToolUnavailableError``).
- Values come back as the engine's driver gives them: SQLite has no boolean or timestamp type, so
  portable code stores those as integers and ISO strings.

Configuration (read in ``setup()``):

- ``DATABASE_URL`` (default ``sqlite:///data/keel.db``, created on first run):
  ``sqlite:///relative/to/the/project/root.db``, ``sqlite:////absolute/path.db``,
  ``sqlite:///:memory:`` or ``postgresql://user:password@host:5432/database`` (extra query
  parameters such as ``?search_path=app`` become server settings);
- ``DB_POOL_MIN`` / ``DB_POOL_MAX`` (1 / 10): the PostgreSQL pool;
- ``DB_BUSY_TIMEOUT`` (5 seconds): how long a writer waits for the SQLite write lock;
- ``DB_CONNECT_TIMEOUT`` (5 seconds): how long reaching PostgreSQL may take;
- ``DB_SQLITE_READERS`` (2): SQLite reader connections.

``setup()`` opens the database and applies ``migrations/`` (:mod:`tools.db.migrations`) before any
plugin boots. If the database cannot be reached, setup fails (``db`` is DEAD with the reason) and
every later call tries again, so the tool recovers by itself when the server comes back; a broken
migration, on the other hand, keeps ``db`` DEAD until the file is fixed and the service restarted.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from core.base_tool import BaseTool
from core.registry import ToolStatus
from core.settings import env_float

from .errors import DatabaseError, DatabaseUnavailableError
from .migrations import apply_migrations
from .postgres import PostgresEngine
from .sqlite import MEMORY, SqliteEngine
from .sqltext import Dialect

log = logging.getLogger("keel.db")

DEFAULT_URL = "sqlite:///data/keel.db"


class Engine(Protocol):
    """What both engines implement; the tool only adds readiness and configuration."""

    dialect: Dialect

    def describe(self) -> str: ...
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def execute(self, sql: str, params: Sequence[Any]) -> int: ...
    async def executemany(self, sql: str, rows: list[Sequence[Any]]) -> None: ...
    async def query(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]: ...
    async def query_one(self, sql: str, params: Sequence[Any]) -> dict[str, Any] | None: ...
    async def scalar(self, sql: str, params: Sequence[Any]) -> Any: ...
    async def run_script_statement(self, sql: str) -> None: ...
    async def lock_migrations(self) -> None: ...
    async def health_check(self) -> bool: ...
    def transaction(self) -> Any: ...


class DbTool(BaseTool):
    """SQL on SQLite or PostgreSQL with $n placeholders, task-bound transactions and migrations."""

    name = "db"

    def __init__(self) -> None:
        self._engine: Engine | None = None
        self._live: Engine | None = None  # the engine once it is open and migrated
        self._fatal: str | None = None
        self._starting = asyncio.Lock()

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgres"``: for the rare statement that must differ per engine."""
        return str(self._engine.dialect) if self._engine is not None else ""

    # -- lifecycle ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        url = os.environ.get("DATABASE_URL", "")
        self._engine = make_engine(url, self.project_root)
        backend = "postgresql" if url.startswith(("postgresql:", "postgres:")) else "sqlite"
        # Several processes share a PostgreSQL database; an SQLite file belongs to one machine.
        self.kernel_registry.set_capability(
            self.name, {"backend": backend, "shared": backend == "postgresql"}
        )
        self._fatal = None
        summary = await self._start()
        self.kernel_registry.update_tool_status(self.name, ToolStatus.OK, summary)

    async def _start(self) -> str:
        """Open the engine and migrate; return a one-line summary for the tool's status."""
        engine = self._require_engine()
        await engine.open()
        try:
            applied = await apply_migrations(engine, self.project_root / "migrations")
        except DatabaseUnavailableError:
            await engine.close()
            raise
        except BaseException as exc:
            await engine.close()
            if isinstance(exc, DatabaseError):
                self._fatal = str(exc)
            raise
        self._live = engine
        summary = f"{engine.describe()}; {len(applied)} migration(s) applied at this boot"
        log.info("db ready: %s", summary)
        return summary

    async def shutdown(self) -> None:
        engine, self._engine, self._live = self._engine, None, None
        if engine is not None:
            await engine.close()

    async def health_check(self) -> bool:
        """True when a trivial query answers."""
        try:
            engine = self._live or await self._ensure_ready()
        except DatabaseError:
            return False
        return await engine.health_check()

    # -- statements --------------------------------------------------------------------------------

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it affected (or returned)."""
        engine = self._live or await self._ensure_ready()
        return await engine.execute(sql, params)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per row of values, all or nothing."""
        engine = self._live or await self._ensure_ready()
        await engine.executemany(sql, list(rows))

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Every row, as a dict per row keyed by column name."""
        engine = self._live or await self._ensure_ready()
        return await engine.query(sql, params)

    async def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row as a dict, or None when there is none."""
        engine = self._live or await self._ensure_ready()
        return await engine.query_one(sql, params)

    async def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or None when there is no row."""
        engine = self._live or await self._ensure_ready()
        return await engine.scalar(sql, params)

    def transaction(self) -> Transaction:
        """An ``async with`` block: BEGIN/COMMIT, or a SAVEPOINT when already inside one."""
        return Transaction(self)

    # -- readiness ---------------------------------------------------------------------------------

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise DatabaseUnavailableError("db is not set up (or has been shut down)")
        return self._engine

    async def _ensure_ready(self) -> Engine:
        """Start the engine now if setup could not reach the database; raise if it still cannot."""
        if self._fatal is not None:
            raise DatabaseUnavailableError(f"db did not start: {self._fatal}")
        engine = self._require_engine()
        async with self._starting:
            if self._live is None:
                await self._start()
        return engine

    def _report(self, error: BaseException | None) -> None:
        """Keep the tool's health for transaction blocks, which the proxy cannot time."""
        registry = getattr(self, "kernel_registry", None)
        if registry is None:
            return
        if isinstance(error, DatabaseUnavailableError):
            registry.update_tool_status(self.name, ToolStatus.DEAD, f"{type(error).__name__}: {error}")
        elif error is None and registry.tool_status(self.name) is ToolStatus.DEAD:
            registry.update_tool_status(self.name, ToolStatus.OK, "Recovered")


class Transaction:
    """What ``db.transaction()`` returns; entering it yields the tool itself."""

    __slots__ = ("_inner", "_tool")

    def __init__(self, tool: DbTool) -> None:
        self._tool = tool
        self._inner: Any = None

    async def __aenter__(self) -> DbTool:
        tool = self._tool
        try:
            engine = tool._live or await tool._ensure_ready()
            inner = engine.transaction()
            await inner.__aenter__()
        except DatabaseError as exc:
            tool._report(exc)
            raise
        self._inner = inner
        tool._report(None)
        return tool

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._inner.__aexit__(exc_type, exc, tb)
        except DatabaseUnavailableError as error:
            self._tool._report(error)
            raise


def make_engine(url: str, project_root: Path) -> Engine:
    """Build the engine ``DATABASE_URL`` names (empty: the default SQLite file under the root)."""
    url = url.strip() or DEFAULT_URL
    busy_timeout = env_float("DB_BUSY_TIMEOUT", 5.0)
    scheme, _, rest = url.partition("://")
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError(
                f"DATABASE_URL={url!r}: write sqlite:///relative/path.db (from the project root), "
                "sqlite:////absolute/path.db or sqlite:///:memory:"
            )
        raw = rest[1:]
        path = raw if raw == MEMORY else str(project_root / raw) if not Path(raw).is_absolute() else raw
        return SqliteEngine(
            path, busy_timeout=busy_timeout, readers=_env_int("DB_SQLITE_READERS", 2, minimum=1)
        )
    if scheme in ("postgresql", "postgres"):
        pool_min = _env_int("DB_POOL_MIN", 1, minimum=0)
        pool_max = _env_int("DB_POOL_MAX", 10, minimum=1)
        if pool_min > pool_max:
            raise ValueError(f"DB_POOL_MIN ({pool_min}) must not exceed DB_POOL_MAX ({pool_max})")
        return PostgresEngine(
            url, pool_min=pool_min, pool_max=pool_max, connect_timeout=env_float("DB_CONNECT_TIMEOUT", 5.0)
        )
    raise ValueError(
        f"DATABASE_URL scheme {scheme!r} is not supported; use sqlite:///path.db or postgresql://..."
    )


def _env_int(name: str, default: int, *, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value
