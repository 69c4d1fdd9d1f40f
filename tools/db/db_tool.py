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
        db.defer("INSERT ...", [1])   # runs with the block's next statement or its end (one hop)

    async def move(tx):               # a read-modify-write, run again on a serialization conflict
        n = await tx.scalar("SELECT n FROM counters WHERE id = $1", [1])
        await tx.execute("UPDATE counters SET n = $1 WHERE id = $2", [n + 1, 1])
        return n + 1
    value = await db.transact(move)   # retries=, isolation= optional

- ``params`` is a list or tuple matching ``$1..$n`` exactly (see :mod:`tools.db.placeholders`).
- ``execute`` returns the number of rows affected (for a statement that returns rows, the number
  returned); ids come from ``RETURNING``. ``executemany`` returns nothing (PostgreSQL does not
  report per-batch counts) and is all-or-nothing.
- A transaction belongs to the task that opened it (see :mod:`tools.db.sqlite`,
  :mod:`tools.db.postgres`); ``async with db.transaction() as tx`` also gives the tool itself, so
  ``tx.execute`` and ``db.execute`` are the same call.
- Every failure is a :class:`~tools.db.errors.DatabaseError` with a closed ``kind``; an unreachable
  database is :class:`~tools.db.errors.DatabaseUnavailableError` (a ``ToolUnavailableError``).
- **What a transaction guarantees, per engine.** SQLite: every block is serializable — one writer
  holds the write lock from ``BEGIN IMMEDIATE`` to ``COMMIT``, so blocks never conflict; they
  queue (``kind="busy"`` past ``DB_BUSY_TIMEOUT``). PostgreSQL: every block is ``SERIALIZABLE``
  by default (``DB_ISOLATION``), so a block that reads what it writes never silently loses a
  concurrent update; instead one of two clashing blocks fails with
  :class:`~tools.db.errors.ConflictError` (``kind="conflict"``, SQLSTATE 40001/40P01, nothing of
  it committed). ``db.transact(body)`` is the portable way to run such a body: it opens a block,
  awaits ``body(tx)``, and on a conflict rolls back and runs the whole body again after a jittered
  exponential backoff, at most ``DB_TRANSACT_RETRIES`` more times; the last conflict then reaches
  the caller (``error.attempts`` says how often it ran). On SQLite the body runs once. The body must
  therefore have no effects outside the database (or only idempotent ones). Inside an open block,
  ``transact`` joins it as a savepoint and does not retry (the conflict aborts the outer block,
  whose own ``transact`` retries). ``transaction(isolation="read_committed")`` (or
  ``"repeatable_read"``) opts a block out on PostgreSQL; a plain ``transaction()`` block that meets
  a conflict raises it as well, never commits half of it. Single statements outside a block are
  atomic on both engines (``UPDATE t SET n = n + 1`` is exact under any isolation).
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
- ``DB_SQLITE_READERS`` (2): SQLite reader connections;
- ``DB_ISOLATION`` (``serializable``): the PostgreSQL level of ``transaction()`` blocks
  (``serializable``, ``repeatable_read`` or ``read_committed``);
- ``DB_TRANSACT_RETRIES`` (10) / ``DB_TRANSACT_BACKOFF`` (0.005 seconds): how many times
  ``transact`` runs a body again after a conflict, and the first backoff (doubling per attempt,
  full jitter, at most 0.5 s).

``setup()`` opens the database and applies ``migrations/`` (:mod:`tools.db.migrations`) before any
plugin boots. If the database cannot be reached, setup fails (``db`` is DEAD with the reason) and
every later call tries again, so the tool recovers by itself when the server comes back; a broken
migration, on the other hand, keeps ``db`` DEAD until the file is fixed and the service restarted.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from core.base_tool import BaseTool
from core.registry import ToolStatus
from core.settings import env_float, env_int, env_str

from .errors import ConflictError, DatabaseError, DatabaseUnavailableError, is_conflict
from .isolation import DEFAULT_ISOLATION, isolation_sql
from .migrations import apply_migrations, discover, recorded_checksums
from .postgres import PostgresEngine
from .sqlite import MEMORY, SqliteEngine
from .sqltext import Dialect

log = logging.getLogger("keel.db")

DEFAULT_URL = "sqlite:///data/keel.db"
BACKOFF_CAP = 0.5

T = TypeVar("T")


class Engine(Protocol):
    """What both engines implement; the tool only adds readiness and configuration."""

    dialect: Dialect

    def describe(self) -> str: ...
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def execute(self, sql: str, params: Sequence[Any]) -> int: ...
    async def executemany(self, sql: str, rows: list[Sequence[Any]]) -> None: ...
    def defer(self, sql: str, params: Sequence[Any]) -> None: ...
    async def query(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]: ...
    async def query_one(self, sql: str, params: Sequence[Any]) -> dict[str, Any] | None: ...
    async def scalar(self, sql: str, params: Sequence[Any]) -> Any: ...
    async def run_script_statement(self, sql: str) -> None: ...
    async def lock_migrations(self) -> None: ...
    async def health_check(self) -> bool: ...
    def transaction(self, isolation: str | None = None) -> Any: ...
    def in_transaction(self) -> bool: ...


class DbTool(BaseTool):
    """SQL on SQLite or PostgreSQL with $n placeholders, task-bound transactions and migrations."""

    name = "db"

    def __init__(self) -> None:
        self._engine: Engine | None = None
        self._live: Engine | None = None  # the engine once it is open and migrated
        self._fatal: str | None = None
        self._starting = asyncio.Lock()
        self.retries = 10
        self.backoff = 0.005
        self.conflicts = 0
        """Conflicts seen by ``transact`` (retried or not), for the dump and the benchmarks."""

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgres"``: for the rare statement that must differ per engine."""
        return str(self._engine.dialect) if self._engine is not None else ""

    # -- lifecycle ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        url = env_str("DATABASE_URL")
        self.retries = env_int("DB_TRANSACT_RETRIES", 10, minimum=0)
        self.backoff = env_float("DB_TRANSACT_BACKOFF", 0.005)
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

    async def apply_pending_migrations(self) -> dict[str, Any]:
        """Apply what is pending under ``migrations/`` on the running database (live reload,
        :mod:`core.reload_sources`): the same rules as at boot, but a refusal leaves ``db`` serving.

        Returns ``{"applied": [names], "error": str | None, "failed": name | None, "unapplied":
        [names]}``: ``failed`` is the file whose statement failed, ``unapplied`` every file on disk
        still pending (or changed since it was applied) when there is an error.
        """
        directory = self.project_root / "migrations"
        engine = self._live or await self._ensure_ready()
        before = await recorded_checksums(engine)
        error: str | None = None
        failed: str | None = None
        try:
            applied = await apply_migrations(engine, directory)
        except DatabaseUnavailableError:
            raise
        except DatabaseError as exc:
            error, failed = exc.detail, getattr(exc, "migration", None)
            after = await recorded_checksums(engine)
            applied = sorted(name for name in after if name not in before)
        if error is None:
            return {"applied": applied, "error": None, "failed": None, "unapplied": []}
        try:
            on_disk = discover(directory)
        except DatabaseError:
            on_disk = []
        unapplied = [m.name for m in on_disk if after.get(m.name) != m.checksum]
        return {"applied": applied, "error": error, "failed": failed, "unapplied": unapplied}

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

    def defer(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Queue a statement of this task's open transaction block, to run (in order) together
        with the block's next statement or at its end, whichever comes first.

        For the many writes of one block whose row counts nobody needs: on SQLite every statement
        otherwise pays a hop to the connection's thread, on PostgreSQL a round trip. The same write
        deferred several times in a row goes to the engine as one batch (``executemany``). Its failure
        is raised by the next statement of the block (or by the block's end) and aborts the
        block like any failed statement; a block that rolls back never runs what it deferred.
        Outside a block it raises ``kind="misuse"``.
        """
        self._require_engine().defer(sql, params)

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

    def transaction(self, isolation: str | None = None) -> Transaction:
        """An ``async with`` block: BEGIN/COMMIT, or a SAVEPOINT when already inside one.

        ``isolation`` (PostgreSQL only; ``DB_ISOLATION`` by default) is one of ``serializable``,
        ``repeatable_read``, ``read_committed``; SQLite checks the name and is serializable anyway.
        """
        if isolation is not None:
            isolation_sql(isolation)
        return Transaction(self, self._ready_engine, self._report, isolation)

    async def transact(
        self,
        body: Callable[[DbTool], Awaitable[T]],
        *,
        retries: int | None = None,
        isolation: str | None = None,
    ) -> T:
        """Run ``await body(tx)`` in a transaction; on a serialization conflict run it again.

        At most ``retries`` (``DB_TRANSACT_RETRIES``) more runs, each after a jittered exponential
        backoff; the last :class:`~tools.db.errors.ConflictError` is raised with ``attempts`` set.
        Any other error rolls back and propagates at once. Inside an open block of this task the
        body runs once, as a savepoint (the outer block owns the retry). Returns the body's result.
        """
        limit = self.retries if retries is None else retries
        if limit < 0:
            raise ValueError(f"retries must be at least 0, got {limit}")
        engine = self._live or await self._ensure_ready()
        if engine.in_transaction():
            limit = 0
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self.transaction(isolation) as tx:
                    return await body(tx)
            except DatabaseError as exc:
                if not is_conflict(exc):
                    raise
                self.conflicts += 1
                if attempt > limit:
                    raise _gave_up(exc, attempt) from exc
            delay = min(BACKOFF_CAP, self.backoff * 2 ** (attempt - 1))
            await asyncio.sleep(random.uniform(0, delay))  # noqa: S311 - jitter, not cryptography

    # -- readiness ---------------------------------------------------------------------------------

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise DatabaseUnavailableError("db is not set up (or has been shut down)")
        return self._engine

    async def _ready_engine(self) -> Engine:
        return self._live or await self._ensure_ready()

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

    __slots__ = ("_inner", "_isolation", "_ready", "_report", "_tool")

    def __init__(
        self,
        tool: DbTool,
        ready: Callable[[], Awaitable[Engine]],
        report: Callable[[BaseException | None], None],
        isolation: str | None = None,
    ) -> None:
        self._tool = tool
        self._ready = ready
        self._report = report
        self._isolation = isolation
        self._inner: Any = None

    async def __aenter__(self) -> DbTool:
        try:
            engine = await self._ready()
            inner = engine.transaction(self._isolation)
            await inner.__aenter__()
        except DatabaseError as exc:
            self._report(exc)
            raise
        self._inner = inner
        self._report(None)
        return self._tool

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._inner.__aexit__(exc_type, exc, tb)
        except DatabaseUnavailableError as error:
            self._report(error)
            raise


def _gave_up(error: DatabaseError, attempts: int) -> ConflictError:
    """The conflict ``transact`` raises once it stops retrying (``error`` may be the aborted block)."""
    conflict = error if error.failure is None else error.failure
    if attempts == 1:
        message = conflict.detail
    else:
        message = f"{conflict.detail} (the body ran {attempts} times; each run met a conflict)"
    return ConflictError(message, code=conflict.code, attempts=attempts)


def make_engine(url: str, project_root: Path) -> Engine:
    """Build the engine ``DATABASE_URL`` names (empty: the default SQLite file under the root)."""
    url = url.strip() or DEFAULT_URL
    busy_timeout = env_float("DB_BUSY_TIMEOUT", 5.0)
    isolation = env_str("DB_ISOLATION", DEFAULT_ISOLATION).lower()
    try:
        isolation_sql(isolation)
    except DatabaseError:
        raise ValueError(
            f"DB_ISOLATION={isolation!r}: use serializable, repeatable_read or read_committed"
        ) from None
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
            path, busy_timeout=busy_timeout, readers=env_int("DB_SQLITE_READERS", 2, minimum=1)
        )
    if scheme in ("postgresql", "postgres"):
        pool_min = env_int("DB_POOL_MIN", 1, minimum=0)
        pool_max = env_int("DB_POOL_MAX", 10, minimum=1)
        if pool_min > pool_max:
            raise ValueError(f"DB_POOL_MIN ({pool_min}) must not exceed DB_POOL_MAX ({pool_max})")
        return PostgresEngine(
            url,
            pool_min=pool_min,
            pool_max=pool_max,
            connect_timeout=env_float("DB_CONNECT_TIMEOUT", 5.0),
            isolation=isolation,
        )
    raise ValueError(
        f"DATABASE_URL scheme {scheme!r} is not supported; use sqlite:///path.db or postgresql://..."
    )
