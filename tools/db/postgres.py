"""The PostgreSQL engine of the ``db`` tool: an asyncpg pool with task-bound transactions.

Outside a transaction each call borrows a pooled connection for one statement. ``transaction()``
borrows one connection for the whole block and binds it to the task that opened the block: calls
from that task run on it (nested blocks are SAVEPOINTs), calls from any other task — including a
task spawned inside the block — borrow their own connection and do not see its uncommitted rows.

The same rules as the SQLite engine hold, so a plugin behaves identically on both:

- a failed statement poisons its block (PostgreSQL itself aborts the transaction); the block
  rolls back when it exits, and exiting it normally raises ``kind="transaction_aborted"`` instead
  of letting ``COMMIT`` silently turn into a rollback;
- a failing ``COMMIT`` (a deferred constraint) raises to the caller; PostgreSQL has already ended
  the transaction, and the connection goes back to the pool clean;
- ``execute`` returns the affected row count, parsed from the command tag (``INSERT 0 3`` -> 3).

**Isolation.** A ``transaction()`` block starts with ``BEGIN ISOLATION LEVEL SERIALIZABLE`` unless
``DB_ISOLATION`` (or the block's own ``isolation=``) says otherwise, so a block behaves as if it ran
alone — what SQLite's single writer gives — and a block that reads a row and writes it back can
never silently lose a concurrent update: PostgreSQL aborts one of the two with SQLSTATE 40001,
raised as :class:`~tools.db.errors.ConflictError` (``kind="conflict"``). ``DbTool.transact`` runs
the body again on such a conflict. Nested blocks are savepoints and inherit the outermost level.
Single statements outside a block run in their own READ COMMITTED transaction (each one is atomic:
``UPDATE t SET n = n + 1`` never loses an increment).

Nothing is retried here: a statement whose connection dropped may or may not have run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import asyncpg

from .deferred import DeferredRuns, add_deferred
from .errors import DatabaseError, DatabaseUnavailableError, DbErrorKind, transaction_aborted
from .isolation import isolation_sql
from .placeholders import check_params, prepare
from .postgres_errors import translate
from .sqltext import Dialect

log = logging.getLogger("keel.db")

_current_task = asyncio.current_task
_POSTGRES = Dialect.POSTGRES


class _Frame:
    """The connection a task's open transaction runs on, and how deep its savepoints go."""

    __slots__ = ("connection", "deferred", "depth", "failure")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.depth = 1
        self.failure: DatabaseError | None = None
        self.deferred: DeferredRuns = []  # see PostgresEngine.defer

    async def flush(self) -> None:
        """Run the deferred statements in order, each run of one statement text as one
        ``executemany`` (asyncpg sends its rows in one round trip); a failure aborts the block."""
        runs, self.deferred = self.deferred, []
        connection = self.connection
        try:
            for sql, rows in runs:
                if len(rows) == 1:
                    await connection.execute(sql, *rows[0])
                else:
                    await connection.executemany(sql, rows)
        except Exception as exc:
            self.failure = translate(exc)
            raise self.failure from exc


class PostgresEngine:
    """PostgreSQL behind the ``db`` API; see the module docstring."""

    dialect = Dialect.POSTGRES

    def __init__(
        self,
        dsn: str,
        *,
        pool_min: int,
        pool_max: int,
        connect_timeout: float,
        isolation: str = "serializable",
    ) -> None:
        self.dsn = dsn
        self.isolation = isolation
        self._begin = f"BEGIN ISOLATION LEVEL {isolation_sql(isolation)}"
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.connect_timeout = connect_timeout
        self._pool: Any = None
        self._frames: dict[asyncio.Task[Any], _Frame] = {}

    def describe(self) -> str:
        return (
            f"postgresql pool of {self.pool_min}..{self.pool_max} connections, transactions {self.isolation}"
        )

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=self.pool_min, max_size=self.pool_max, timeout=self.connect_timeout
            )
        except Exception as exc:
            error = translate(exc)
            if error.kind is DbErrorKind.UNAVAILABLE:
                raise error from exc
            raise DatabaseUnavailableError(f"cannot connect: {error.detail}") from exc

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), self.connect_timeout)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                pool.terminate()

    # -- statements --------------------------------------------------------------------------------

    # The statement methods are plain functions that check the call and hand back the coroutine
    # that runs it (as on SQLite): one coroutine per call instead of three.

    def execute(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, int]:
        return self._run(sql, params, "execute", _row_count)

    def query(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        return self._run(sql, params, "fetch", _dicts)

    def query_one(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, dict[str, Any] | None]:
        return self._run(sql, params, "fetchrow", _dict_or_none)

    def scalar(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, Any]:
        return self._run(sql, params, "fetchval")

    async def executemany(self, sql: str, rows: list[Sequence[Any]]) -> None:
        prepared = prepare(sql, _POSTGRES)
        for row in rows:
            check_params(prepared, row)
        if rows:  # asyncpg runs the batch atomically when not already inside a transaction
            await self._call(prepared.text, "executemany", (rows,))

    def defer(self, sql: str, params: Sequence[Any]) -> None:
        """Queue a statement of the calling task's transaction; it runs, in order, before the
        block's next statement or at its end (consecutive ones of one text as one batch)."""
        prepared = prepare(sql, _POSTGRES)
        check_params(prepared, params)
        frame = self._frames.get(_current_task()) if self._frames else None  # type: ignore[arg-type]
        if frame is None:
            raise DatabaseError(DbErrorKind.MISUSE, "defer() is for statements inside a transaction block")
        if frame.failure is not None:
            raise transaction_aborted(frame.failure)
        add_deferred(frame.deferred, prepared.text, params)  # asyncpg batches any statement

    async def run_script_statement(self, sql: str) -> None:
        """Run one statement of a migration as written, on the current transaction's connection."""
        await self._call(sql, "execute", ())

    async def lock_migrations(self) -> None:
        """Serialise migration transactions of every process on this schema until they commit."""
        await self._call(
            "SELECT pg_advisory_xact_lock(hashtext('keel_migrations:' || current_schema()))", "execute", ()
        )

    def _run(
        self, sql: str, params: Sequence[Any], method: str, convert: Callable[[Any], Any] | None = None
    ) -> Coroutine[Any, Any, Any]:
        prepared = prepare(sql, _POSTGRES)
        check_params(prepared, params)
        return self._call(prepared.text, method, params, convert)

    async def _call(
        self, sql: str, method: str, params: Sequence[Any], convert: Callable[[Any], Any] | None = None
    ) -> Any:
        frame = self._frames.get(_current_task()) if self._frames else None  # type: ignore[arg-type]
        if frame is not None:
            if frame.failure is not None:
                raise transaction_aborted(frame.failure)
            if frame.deferred:
                await frame.flush()
            try:
                result = await getattr(frame.connection, method)(sql, *params)
            except Exception as exc:
                error = translate(exc)
                if error.kind is not DbErrorKind.PARAMETERS:
                    frame.failure = error
                raise error from exc
        else:
            pool = self._require_pool()
            try:
                async with pool.acquire() as connection:
                    result = await getattr(connection, method)(sql, *params)
            except Exception as exc:
                raise translate(exc) from exc
        return result if convert is None else convert(result)

    def _current_pool(self) -> Any:
        return self._pool

    def _require_pool(self) -> Any:
        if self._pool is None:
            raise DatabaseUnavailableError("the PostgreSQL pool is closed")
        return self._pool

    # -- transactions ------------------------------------------------------------------------------

    def transaction(self, isolation: str | None = None) -> PostgresTransaction:
        begin = self._begin if isolation is None else f"BEGIN ISOLATION LEVEL {isolation_sql(isolation)}"
        return PostgresTransaction(self._frames, self._require_pool, self._current_pool, begin)

    def in_transaction(self) -> bool:
        """True when the calling task has a transaction block open."""
        task = _current_task()
        return task is not None and task in self._frames

    async def health_check(self) -> bool:
        try:
            return bool(await self._call("SELECT 1", "fetchval", ()) == 1)
        except DatabaseError:
            return False


class PostgresTransaction:
    """``async with engine.transaction():`` — BEGIN on a borrowed connection, or a SAVEPOINT."""

    __slots__ = ("_begin", "_depth", "_frames", "_pool", "_pool_now", "_task")

    def __init__(
        self,
        frames: dict[asyncio.Task[Any], _Frame],
        pool: Callable[[], Any],
        pool_now: Callable[[], Any],
        begin: str,
    ) -> None:
        # The engine's open blocks by task; ``pool`` raises when it is closed, ``pool_now`` is None then.
        self._frames = frames
        self._pool = pool
        self._pool_now = pool_now
        self._begin = begin
        self._depth = 0
        self._task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> None:
        task = _current_task()
        if task is None:
            raise DatabaseError(DbErrorKind.MISUSE, "transaction() must be used from inside a task")
        frame = self._frames.get(task)
        if frame is not None:
            if frame.failure is not None:
                raise transaction_aborted(frame.failure)
            depth = frame.depth + 1
            if frame.deferred:
                await frame.flush()
            try:
                await frame.connection.execute(f"SAVEPOINT keel_{depth}")
            except Exception as exc:
                raise translate(exc) from exc
            frame.depth = self._depth = depth
            self._task = task
            return
        pool = self._pool()
        try:
            connection = await pool.acquire()
        except Exception as exc:
            raise translate(exc) from exc
        try:
            await connection.execute(self._begin)
        except BaseException as exc:
            await pool.release(connection)  # release() resets the connection (rolls back if needed)
            if isinstance(exc, Exception):
                raise translate(exc) from exc
            raise
        self._frames[task] = _Frame(connection)
        self._depth = 1
        self._task = task

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        frame = self._frames.get(self._task) if self._task is not None else None
        if frame is None:  # __aenter__ did not complete, so there is nothing to end
            return
        deferred_error: DatabaseError | None = None
        if exc_type is not None or frame.failure is not None:
            frame.deferred = []  # the block rolls back: what it deferred never runs
        elif frame.deferred:
            try:
                await frame.flush()
            except DatabaseError as failed:
                deferred_error = failed  # also the block's failure: it rolls back, then raises it
        failure = frame.failure
        commit = exc_type is None and failure is None
        connection = frame.connection
        error: DatabaseError | None = None
        try:
            if self._depth == 1:
                status = await connection.execute("COMMIT" if commit else "ROLLBACK")
                if commit and status == "ROLLBACK":  # PostgreSQL's answer to COMMIT in an aborted block
                    error = DatabaseError(DbErrorKind.TRANSACTION_ABORTED, "COMMIT was turned into ROLLBACK")
            elif commit:
                await _release(connection, f"keel_{self._depth}")
            else:
                await _rollback_to(connection, f"keel_{self._depth}")
        except Exception as err:
            error = translate(err)
            error.__cause__ = err
            if exc_type is not None:
                log.error("ending a transaction after %s failed too", exc_type.__name__, exc_info=err)
        finally:
            frame.failure = None
            frame.depth = self._depth - 1
            if self._depth == 1:
                self._frames.pop(self._task, None)  # type: ignore[arg-type]
                await _give_back(self._pool_now(), connection)
        if error is not None and exc_type is None:
            raise error
        if deferred_error is not None:
            raise deferred_error
        if failure is not None and exc_type is None:
            raise transaction_aborted(failure)


async def _give_back(pool: Any, connection: Any) -> None:
    """Return a transaction's connection; the pool resets it (rolling back anything left open)."""
    if pool is None:
        connection.terminate()
        return
    try:
        await pool.release(connection)
    except Exception:
        log.exception("could not return a connection to the pool; it is dropped")
        connection.terminate()


async def _release(connection: Any, name: str) -> None:
    try:
        await connection.execute(f"RELEASE SAVEPOINT {name}")
    except Exception:
        await _rollback_to(connection, name)
        raise


async def _rollback_to(connection: Any, name: str) -> None:
    await connection.execute(f"ROLLBACK TO SAVEPOINT {name}")
    await connection.execute(f"RELEASE SAVEPOINT {name}")


def _row_count(status: str) -> int:
    """The rows a command affected, from its status tag (``INSERT 0 3`` -> 3)."""
    tail = status.rpartition(" ")[2]
    return int(tail) if tail.isdigit() else 0


def _dicts(records: list[Any]) -> list[dict[str, Any]]:
    return [dict(record) for record in records]


def _dict_or_none(record: Any) -> dict[str, Any] | None:
    return None if record is None else dict(record)
