"""The errors the ``db`` tool raises: one type, a closed ``kind``, the same on every engine.

A plugin branches on ``error.kind`` (``unique_violation``, ``foreign_key`` ...), never on the
message: the message is the engine's own wording and differs between SQLite and PostgreSQL. No
``sqlite3`` or ``asyncpg`` exception ever leaves the tool; the original is kept as ``__cause__``
for the logs.

:class:`DatabaseUnavailableError` is also a :class:`~core.errors.ToolUnavailableError`, so the
ToolProxy marks ``db`` DEAD the moment the database cannot be reached, and OK again ("Recovered")
on the next call that succeeds.

Each error declares ``error_class`` (see :func:`core.contracts.errors.classify`): a busy lock, a
serialization conflict or an outage is worth retrying; a constraint or a syntax error is not.
"""

from __future__ import annotations

from enum import StrEnum

from core.contracts.errors import ErrorClass
from core.errors import KeelError, ToolUnavailableError


class DbErrorKind(StrEnum):
    """What went wrong, in words that mean the same on SQLite and PostgreSQL."""

    UNIQUE_VIOLATION = "unique_violation"
    FOREIGN_KEY = "foreign_key"
    NOT_NULL = "not_null"
    CHECK = "check"
    SYNTAX = "syntax"
    UNDEFINED_TABLE = "undefined_table"
    UNDEFINED_COLUMN = "undefined_column"
    PARAMETERS = "parameters"
    """The ``$n`` placeholders and the values passed do not match, or a value cannot be bound."""
    DATA = "data"
    """A value the column or the expression cannot hold (bad cast, out of range, division by zero)."""
    BUSY = "busy"
    """The write lock stayed taken for longer than ``DB_BUSY_TIMEOUT`` (after the retries)."""
    CONFLICT = "conflict"
    """A serialization failure or a deadlock: the whole transaction may be retried."""
    TRANSACTION_ABORTED = "transaction_aborted"
    """A statement inside the transaction failed earlier, so its work was rolled back."""
    READ_ONLY = "read_only"
    MISUSE = "misuse"
    """The API was used in a way it does not support (a raw ``BEGIN``, two statements in one call)."""
    MIGRATION = "migration"
    UNAVAILABLE = "unavailable"
    OTHER = "other"


_TRANSIENT = frozenset({DbErrorKind.BUSY, DbErrorKind.CONFLICT, DbErrorKind.UNAVAILABLE})

_CALLER = frozenset(
    {
        DbErrorKind.UNIQUE_VIOLATION,
        DbErrorKind.FOREIGN_KEY,
        DbErrorKind.NOT_NULL,
        DbErrorKind.CHECK,
        DbErrorKind.SYNTAX,
        DbErrorKind.UNDEFINED_TABLE,
        DbErrorKind.UNDEFINED_COLUMN,
        DbErrorKind.PARAMETERS,
        DbErrorKind.DATA,
        DbErrorKind.CONFLICT,
        DbErrorKind.TRANSACTION_ABORTED,
        DbErrorKind.MISUSE,
    }
)
"""Kinds that say the statement or its data was wrong, not the database: the ToolProxy never counts
them toward DEAD (``core.errors.is_caller_error``)."""


class DatabaseError(KeelError):
    """Any failure of a ``db`` call. ``kind`` is the closed category; ``code`` the engine's own code
    (a SQLSTATE on PostgreSQL, the extended result code name on SQLite) for the curious."""

    def __init__(self, kind: DbErrorKind, message: str, *, code: str | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.detail = message
        self.code = code
        self.failure: DatabaseError | None = None

    @property
    def caller_error(self) -> bool:
        return self.kind in _CALLER

    @property
    def error_class(self) -> ErrorClass:
        if self.kind in _TRANSIENT:
            return ErrorClass.TRANSIENT
        if self.kind is DbErrorKind.OTHER:
            return ErrorClass.UNKNOWN
        return ErrorClass.PERMANENT


class DatabaseUnavailableError(DatabaseError, ToolUnavailableError):
    """The database cannot be reached or opened: the proxy marks ``db`` DEAD at once."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(DbErrorKind.UNAVAILABLE, message, code=code)


class ConflictError(DatabaseError):
    """A serialization failure or a deadlock (``kind="conflict"``): PostgreSQL rolled the whole
    transaction back, so nothing of it was committed and running the body again is safe.

    :meth:`tools.db.db_tool.DbTool.transact` retries it; ``attempts`` says how many times the body
    ran before this error reached the caller (1 for a plain ``transaction()`` block)."""

    def __init__(self, message: str, *, code: str | None = None, attempts: int = 1) -> None:
        super().__init__(DbErrorKind.CONFLICT, message, code=code)
        self.attempts = attempts


class MigrationError(DatabaseError):
    """A migration file cannot be ordered or applied; raised from ``setup()``, so ``db`` is DEAD."""

    def __init__(self, message: str) -> None:
        super().__init__(DbErrorKind.MIGRATION, message)
        self.migration: str | None = None
        """The file (``<domain>/<file>``) whose statement failed, when one did."""


def transaction_aborted(failure: DatabaseError) -> DatabaseError:
    """The error for a statement (or block exit) after an earlier statement of the block failed.

    The first failure is kept as ``error.failure`` (``transact`` retries a block whose first
    failure was a conflict, even if the body caught that error and carried on)."""
    error = DatabaseError(
        DbErrorKind.TRANSACTION_ABORTED,
        f"an earlier statement in this transaction failed ({failure}); its block is rolled back "
        "when it exits (wrap a statement that may fail in a nested transaction() to recover)",
    )
    error.failure = failure
    return error


def is_conflict(error: BaseException) -> bool:
    """True for a conflict, or for a block aborted because one of its statements hit a conflict."""
    if not isinstance(error, DatabaseError):
        return False
    if error.kind is DbErrorKind.CONFLICT:
        return True
    failure = error.failure
    return failure is not None and failure.kind is DbErrorKind.CONFLICT
