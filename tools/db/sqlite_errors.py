"""Translate ``sqlite3`` exceptions into :class:`~tools.db.errors.DatabaseError` kinds.

SQLite reports constraint failures with extended result codes (``SQLITE_CONSTRAINT_UNIQUE`` ...),
which Python exposes as ``sqlite_errorcode``; everything filed under the generic ``SQLITE_ERROR``
(no such table, syntax error ...) can only be told apart by its message.
"""

from __future__ import annotations

import sqlite3

from .errors import DatabaseError, DatabaseUnavailableError, DbErrorKind

_BUSY, _LOCKED, _READONLY = 5, 6, 8
_UNAVAILABLE_CODES = frozenset({3, 10, 11, 13, 14, 26})  # PERM, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB
_DATA_CODES = frozenset({18, 20})  # TOOBIG, MISMATCH
_CONSTRAINT_KINDS = {
    2067: DbErrorKind.UNIQUE_VIOLATION,  # SQLITE_CONSTRAINT_UNIQUE
    1555: DbErrorKind.UNIQUE_VIOLATION,  # SQLITE_CONSTRAINT_PRIMARYKEY
    787: DbErrorKind.FOREIGN_KEY,  # SQLITE_CONSTRAINT_FOREIGNKEY
    1299: DbErrorKind.NOT_NULL,  # SQLITE_CONSTRAINT_NOTNULL
    275: DbErrorKind.CHECK,  # SQLITE_CONSTRAINT_CHECK
}
_MESSAGE_KINDS = (
    ("no such table", DbErrorKind.UNDEFINED_TABLE),
    ("no such column", DbErrorKind.UNDEFINED_COLUMN),
    ("has no column named", DbErrorKind.UNDEFINED_COLUMN),
    ("syntax error", DbErrorKind.SYNTAX),
    ("incomplete input", DbErrorKind.SYNTAX),
    ("unrecognized token", DbErrorKind.SYNTAX),
    ("incorrect number of bindings", DbErrorKind.PARAMETERS),
    ("error binding parameter", DbErrorKind.PARAMETERS),
    ("is not supported", DbErrorKind.PARAMETERS),  # "type 'X' is not supported" when binding
    ("one statement at a time", DbErrorKind.MISUSE),
    ("can only execute dml", DbErrorKind.MISUSE),
    ("closed database", DbErrorKind.UNAVAILABLE),
)


def _primary(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: someone else holds the lock; nothing was done."""
    return _primary(exc) in (_BUSY, _LOCKED)


def is_read_only(exc: BaseException) -> bool:
    return _primary(exc) == _READONLY


ENGINE_ERRORS = (sqlite3.Error, OverflowError)
"""What a ``sqlite3`` call raises: its own errors, and OverflowError for an int beyond 64 bits."""


def translate(exc: BaseException) -> DatabaseError:
    message = str(exc)
    if not isinstance(exc, sqlite3.Error):
        return DatabaseError(DbErrorKind.PARAMETERS, f"cannot bind a value: {message}")
    code_name = getattr(exc, "sqlite_errorname", None)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = _primary(exc)
    if primary in _UNAVAILABLE_CODES:
        return DatabaseUnavailableError(message, code=code_name)
    kind = _kind(exc, message.lower(), code, primary)
    if kind is DbErrorKind.UNAVAILABLE:
        return DatabaseUnavailableError(message, code=code_name)
    return DatabaseError(kind, message, code=code_name)


def _kind(exc: sqlite3.Error, lowered: str, code: int | None, primary: int | None) -> DbErrorKind:
    if isinstance(exc, sqlite3.IntegrityError) or primary == 19:
        if code in _CONSTRAINT_KINDS:
            return _CONSTRAINT_KINDS[code]
        for needle, kind in (
            ("unique constraint", DbErrorKind.UNIQUE_VIOLATION),
            ("foreign key constraint", DbErrorKind.FOREIGN_KEY),
            ("not null constraint", DbErrorKind.NOT_NULL),
            ("check constraint", DbErrorKind.CHECK),
        ):
            if needle in lowered:
                return kind
        return DbErrorKind.OTHER
    if primary in (_BUSY, _LOCKED):
        return DbErrorKind.BUSY
    if primary == _READONLY:
        return DbErrorKind.READ_ONLY
    if primary in _DATA_CODES or isinstance(exc, sqlite3.DataError):
        return DbErrorKind.DATA
    for needle, kind in _MESSAGE_KINDS:
        if needle in lowered:
            return kind
    if isinstance(exc, sqlite3.InterfaceError):
        return DbErrorKind.PARAMETERS
    return DbErrorKind.OTHER
