"""The SQLite engine of the ``db`` tool: one writer connection, a few readers, task-bound transactions.

How it keeps concurrent tasks apart:

- **One writer.** Every write and every transaction runs on the writer connection, one holder at a
  time (:class:`~tools.db.write_lock.WriteLock`). A transaction starts with ``BEGIN IMMEDIATE`` so
  it owns SQLite's write lock from its first statement (a deferred transaction that reads first
  and writes later can fail with "database is locked" regardless of the busy timeout).
- **Readers on their own connections.** A read by a task that is not inside a transaction runs on
  a reader connection (``PRAGMA query_only``), so it sees only committed rows — never another
  task's half-done transaction. A ``WITH ...`` that turns out to write is refused by the reader
  before it does anything and re-run on the writer.
- **Transactions belong to a task.** ``transaction()`` records the task that opened it; a call from
  that task joins it (nested blocks are SAVEPOINTs), a call from any other task does not — not even
  from a task spawned inside the block, although context variables are copied into it. That task
  reads committed data and waits for the write lock like everyone else.
- **A failed statement poisons its block**, as on PostgreSQL: later statements in the same block
  raise ``kind="transaction_aborted"`` until the block exits, and the block then rolls back (to its
  savepoint, when nested). Catching an error inside a block and carrying on therefore behaves the
  same on both engines; wrap the statement that may fail in a nested ``transaction()`` to recover.
- **A failing COMMIT or RELEASE** (a deferred foreign key, say) raises to the caller, and the
  transaction is rolled back in the same job, so the connection is clean for the next holder.
- **Busy / locked** (another process holds the file lock beyond ``busy_timeout``) is retried up to
  three times with exponential backoff, but only for statements that cannot have taken effect:
  ``BEGIN IMMEDIATE``, ``COMMIT``, reads, and single statements outside a transaction.

``:memory:`` databases cannot be shared between connections, so there every call, reads included,
runs on the writer under the write lock (still no dirty reads, just no read concurrency).

Pragmas: ``journal_mode=WAL``, ``synchronous=NORMAL`` (durable across a process crash; a power
loss may lose the last commits), ``foreign_keys=ON``, ``busy_timeout`` from ``DB_BUSY_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from core.sqlite_thread import rollback_if_open

from .deferred import DeferredRuns, add_deferred
from .errors import DatabaseError, DatabaseUnavailableError, DbErrorKind, transaction_aborted
from .isolation import isolation_sql
from .placeholders import check_params, prepare
from .sqlite_errors import ENGINE_ERRORS, is_busy, is_read_only, translate
from .sqlite_worker import SqliteWorker
from .sqltext import Dialect
from .write_lock import WriteLock

log = logging.getLogger("keel.db")

MEMORY = ":memory:"
BUSY_RETRIES = 3
BACKOFF_SECONDS = 0.025

_current_task = asyncio.current_task
_SQLITE = Dialect.SQLITE


_BATCHABLE = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})
"""Writes sqlite3's ``executemany`` runs (``RETURNING`` included); it refuses a statement that
may return rows otherwise, such as a ``WITH`` or a ``SELECT``, so those are never batched."""


class OpenBlock:
    """The transaction block open on the writer, shared by the engine and its transactions."""

    __slots__ = ("deferred", "depth", "failure", "owner")

    def __init__(self) -> None:
        self.owner: asyncio.Task[Any] | None = None
        self.depth = 0
        self.failure: DatabaseError | None = None
        # Statements the transaction's task handed to ``defer``, run in the same thread hop as
        # its next statement (or its end), as runs (:mod:`tools.db.deferred`).
        self.deferred: DeferredRuns = []


class SqliteEngine:
    """SQLite behind the ``db`` API; see the module docstring for the concurrency rules."""

    dialect = Dialect.SQLITE

    def __init__(self, path: str, *, busy_timeout: float, readers: int) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._reader_count = 0 if path == MEMORY else max(1, readers)
        self._writer: SqliteWorker | None = None
        self._readers: list[SqliteWorker] = []
        self._next_reader = 0
        self._lock = WriteLock()
        self._block = OpenBlock()

    def describe(self) -> str:
        return f"sqlite {self.path} (WAL, {self._reader_count} readers)"

    # -- lifecycle ---------------------------------------------------------------------------------

    async def open(self) -> None:
        if self.path != MEMORY:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseUnavailableError(f"cannot create the folder of {self.path}: {exc}") from exc
        writer = SqliteWorker("keel-db-writer", lambda: self._connect(read_only=False))
        await self._start(writer)
        self._writer = writer
        for index in range(self._reader_count):
            reader = SqliteWorker(f"keel-db-reader-{index}", lambda: self._connect(read_only=True))
            await self._start(reader)
            self._readers.append(reader)

    async def _start(self, worker: SqliteWorker) -> None:
        try:
            await worker.start()
        except sqlite3.Error as exc:
            await self.close()
            raise DatabaseUnavailableError(f"cannot open {self.path}: {exc}") from exc

    def _connect(self, *, read_only: bool) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=self.busy_timeout
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            if read_only:
                connection.execute("PRAGMA query_only = ON")
            else:
                _with_busy_retry(connection.execute, "PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            connection.close()
            raise
        return connection

    async def close(self) -> None:
        workers = [w for w in (self._writer, *self._readers) if w is not None]
        self._writer, self._readers = None, []
        for worker in workers:
            await worker.stop()

    # -- statements --------------------------------------------------------------------------------

    # The statement methods are plain functions that check the call and hand back the coroutine
    # that runs it: one coroutine per call instead of three, which matters at ~30 us per statement.

    def execute(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, int]:
        return self._run(sql, params, _execute)

    def query(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        return self._run(sql, params, _query)

    def query_one(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, dict[str, Any] | None]:
        return self._run(sql, params, _query_one)

    def scalar(self, sql: str, params: Sequence[Any]) -> Coroutine[Any, Any, Any]:
        return self._run(sql, params, _scalar)

    async def executemany(self, sql: str, rows: list[Sequence[Any]]) -> None:
        prepared = prepare(sql, _SQLITE)
        for row in rows:
            check_params(prepared, row)
        owner = self._block.owner
        if owner is not None and owner is _current_task():
            await self._in_transaction(_executemany, prepared.text, rows)
        else:
            await self._write(_executemany_atomically, prepared.text, rows)

    def defer(self, sql: str, params: Sequence[Any]) -> None:
        """Queue a statement of the calling task's transaction; it runs, in order, in the same
        thread hop as the block's next statement or its end (one hop for many statements)."""
        prepared = prepare(sql, _SQLITE)
        check_params(prepared, params)
        owner = self._block.owner
        if owner is None or owner is not _current_task():
            raise DatabaseError(DbErrorKind.MISUSE, "defer() is for statements inside a transaction block")
        if self._block.failure is not None:
            raise transaction_aborted(self._block.failure)
        # A run goes to sqlite3 as one executemany, about 1.5x faster than as many execute calls.
        add_deferred(self._block.deferred, prepared.text, params, batchable=prepared.leading in _BATCHABLE)

    async def run_script_statement(self, sql: str) -> None:
        """Run one statement of a migration as written (no placeholder rewriting)."""
        await self._in_transaction(_execute, sql, ())

    async def lock_migrations(self) -> None:
        """Nothing to do: the migration's ``BEGIN IMMEDIATE`` already excludes other writers."""

    def _run(self, sql: str, params: Sequence[Any], job: Any) -> Coroutine[Any, Any, Any]:
        prepared = prepare(sql, _SQLITE)
        check_params(prepared, params)
        owner = self._block.owner
        if owner is not None and owner is _current_task():
            return self._in_transaction(job, prepared.text, params)
        if prepared.maybe_read_only and self._readers:
            return self._read(job, prepared.text, params)
        return self._write(job, prepared.text, params)

    async def _in_transaction(self, job: Any, sql: str, params: Any) -> Any:
        if self._block.failure is not None:
            raise transaction_aborted(self._block.failure)
        writer = self._require(self._writer)
        try:
            if self._block.deferred:
                deferred, self._block.deferred = self._block.deferred, []
                return await writer.submit(_after_deferred, deferred, job, sql, params)
            return await writer.submit(job, sql, params)
        except ENGINE_ERRORS as exc:
            error = translate(exc)
            if error.kind is not DbErrorKind.PARAMETERS:
                self._block.failure = error
            raise error from exc

    async def _read(self, job: Any, sql: str, params: Any) -> Any:
        readers = self._readers
        index = self._next_reader
        self._next_reader = (index + 1) % len(readers)
        try:
            return await readers[index].submit(_retrying, job, sql, params)
        except ENGINE_ERRORS as exc:
            if not is_read_only(exc):
                raise translate(exc) from exc
        return await self._write(job, sql, params)  # a WITH ... that writes

    async def _write(self, job: Any, sql: str, params: Any) -> Any:
        writer = self._require(self._writer)
        lock = self._lock
        if not lock.try_acquire():
            await lock.acquire(self.busy_timeout)
        try:
            return await writer.submit(_retrying, job, sql, params)
        except ENGINE_ERRORS as exc:
            raise translate(exc) from exc
        finally:
            # Safe even if we were cancelled mid-statement: the worker runs jobs in order, and a
            # statement outside a transaction leaves no transaction open behind it.
            lock.release()

    def _live_writer(self) -> SqliteWorker:
        return self._require(self._writer)

    @staticmethod
    def _require(worker: SqliteWorker | None) -> SqliteWorker:
        if worker is None:
            raise DatabaseUnavailableError("the SQLite engine is closed")
        return worker

    # -- transactions ------------------------------------------------------------------------------

    def transaction(self, isolation: str | None = None) -> SqliteTransaction:
        """A block; every block is serializable here (one writer), so ``isolation`` is only checked."""
        if isolation is not None:
            isolation_sql(isolation)
        return SqliteTransaction(self, self._block, self._lock, self._live_writer)

    def in_transaction(self) -> bool:
        """True when the calling task has a transaction block open."""
        owner = self._block.owner
        return owner is not None and owner is _current_task()

    async def health_check(self) -> bool:
        worker = self._readers[0] if self._readers else self._writer
        if worker is None:
            return False
        try:
            return bool(await worker.submit(_scalar, "SELECT 1", ()) == 1)
        except sqlite3.Error:
            return False


class SqliteTransaction:
    """``async with engine.transaction():`` — BEGIN IMMEDIATE, or a SAVEPOINT when nested."""

    __slots__ = ("_block", "_depth", "_engine", "_lock", "_writer")

    def __init__(
        self, engine: SqliteEngine, block: OpenBlock, lock: WriteLock, writer: Callable[[], SqliteWorker]
    ) -> None:
        self._engine = engine
        self._block = block
        self._lock = lock
        self._writer = writer
        self._depth = 0

    async def __aenter__(self) -> None:
        block = self._block
        writer = self._writer()
        task = _current_task()
        if task is None:
            raise DatabaseError(DbErrorKind.MISUSE, "transaction() must be used from inside a task")
        if block.owner is task:
            if block.failure is not None:
                raise transaction_aborted(block.failure)
            depth = block.depth + 1
            deferred, block.deferred = block.deferred, []
            try:
                await writer.submit(_after_deferred, deferred, _execute, f"SAVEPOINT keel_{depth}", ())
            except sqlite3.Error as exc:
                error = translate(exc)
                if deferred:  # a deferred statement of the enclosing block failed: it is aborted
                    block.failure = error
                raise error from exc
            block.depth = self._depth = depth
            return
        if not self._lock.try_acquire():
            await self._lock.acquire(self._engine.busy_timeout)
        try:
            await writer.submit(_begin)
        except BaseException as exc:
            writer.post(rollback_if_open)  # in case BEGIN ran after we stopped waiting for it
            self._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise translate(exc) from exc
            raise
        block.owner = task
        block.depth = self._depth = 1
        block.failure = None
        block.deferred = []

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        block = self._block
        writer = self._writer()
        failure = block.failure
        commit = exc_type is None and failure is None
        deferred, block.deferred = block.deferred, []
        if not commit:
            deferred = []  # the block rolls back: what it deferred never runs
        error: DatabaseError | None = None
        try:
            if self._depth == 1:
                await writer.submit(_finish, commit, deferred)
            else:
                name = f"keel_{self._depth}"
                if commit:
                    await writer.submit(_release, name, deferred)
                else:
                    await writer.submit(_rollback_to, name)
        except sqlite3.Error as err:
            error = translate(err)
            error.__cause__ = err
            if exc_type is not None:
                log.error("ending a transaction after %s failed too", exc_type.__name__, exc_info=err)
        finally:
            block.failure = None  # the failed block has now been rolled back
            block.depth = self._depth - 1
            if self._depth == 1:
                block.owner = None
                self._lock.release()
        if error is not None and exc_type is None:
            raise error
        if failure is not None and exc_type is None:
            raise transaction_aborted(failure)


# -- jobs: each runs in the connection's thread and does one whole call -------------------------------


def _execute(connection: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    cursor = connection.execute(sql, params)
    if cursor.description is not None:
        return len(cursor.fetchall())  # rows returned (SELECT, RETURNING), as PostgreSQL counts them
    count = cursor.rowcount
    return count if count > 0 else 0


def _query(connection: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cursor = connection.execute(sql, params)
    description = cursor.description
    if description is None:
        return []
    names = [column[0] for column in description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _query_one(connection: sqlite3.Connection, sql: str, params: Sequence[Any]) -> dict[str, Any] | None:
    cursor = connection.execute(sql, params)
    try:
        description = cursor.description
        row = cursor.fetchone() if description is not None else None
        if row is None:
            return None
        return dict(zip([column[0] for column in description], row, strict=True))
    finally:
        cursor.close()  # resets the statement, so an unread RETURNING row cannot hold a transaction open


def _scalar(connection: sqlite3.Connection, sql: str, params: Sequence[Any]) -> Any:
    cursor = connection.execute(sql, params)
    try:
        row = cursor.fetchone() if cursor.description is not None else None
        return None if row is None else row[0]
    finally:
        cursor.close()


def _executemany(connection: sqlite3.Connection, sql: str, rows: list[Sequence[Any]]) -> None:
    connection.executemany(sql, rows)


def _executemany_atomically(connection: sqlite3.Connection, sql: str, rows: list[Sequence[Any]]) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(sql, rows)
        connection.execute("COMMIT")
    except BaseException:
        rollback_if_open(connection)
        raise


def _retrying(connection: sqlite3.Connection, job: Any, sql: str, params: Any) -> Any:
    """Run a statement that cannot have taken effect when it reports busy/locked, retrying that."""
    for attempt in range(BUSY_RETRIES + 1):
        try:
            return job(connection, sql, params)
        except sqlite3.OperationalError as exc:
            if connection.in_transaction:  # never leave an implicit transaction behind
                connection.rollback()
            if attempt == BUSY_RETRIES or not is_busy(exc):
                raise
        _backoff(attempt)


def _with_busy_retry(statement: Any, sql: str) -> Any:
    for attempt in range(BUSY_RETRIES + 1):
        try:
            return statement(sql)
        except sqlite3.OperationalError as exc:
            if attempt == BUSY_RETRIES or not is_busy(exc):
                raise
        _backoff(attempt)


def _backoff(attempt: int) -> None:
    """Wait before retry ``attempt + 1`` (in the connection's thread, never on the loop)."""
    time.sleep(BACKOFF_SECONDS * 2**attempt)


def _begin(connection: sqlite3.Connection) -> None:
    _with_busy_retry(connection.execute, "BEGIN IMMEDIATE")


def _run_deferred(connection: sqlite3.Connection, runs: DeferredRuns) -> None:
    """Run what a transaction deferred, in order; a run of one write is one ``executemany``, which
    stops at the first row that fails exactly as a loop of ``execute`` would."""
    for sql, rows in runs:
        if len(rows) == 1:
            connection.execute(sql, rows[0])
        else:
            connection.executemany(sql, rows)


def _after_deferred(connection: sqlite3.Connection, runs: DeferredRuns, job: Any, *args: Any) -> Any:
    """Run the statements a transaction deferred, then ``job``: one thread hop for all of them."""
    _run_deferred(connection, runs)
    return job(connection, *args)


def _finish(
    connection: sqlite3.Connection,
    commit: bool,
    runs: DeferredRuns = (),  # type: ignore[assignment]
) -> None:
    """End the outermost transaction (after its deferred statements); if they or COMMIT fail, roll
    back before raising."""
    if not commit:
        rollback_if_open(connection)
        return
    try:
        _run_deferred(connection, runs)
        _with_busy_retry(connection.execute, "COMMIT")
    except BaseException:
        rollback_if_open(connection)
        raise


def _release(
    connection: sqlite3.Connection,
    name: str,
    runs: DeferredRuns = (),  # type: ignore[assignment]
) -> None:
    try:
        _run_deferred(connection, runs)
        connection.execute(f"RELEASE {name}")
    except BaseException:
        _rollback_to(connection, name)
        raise


def _rollback_to(connection: sqlite3.Connection, name: str) -> None:
    connection.execute(f"ROLLBACK TO {name}")
    connection.execute(f"RELEASE {name}")
