"""Translate asyncpg and network exceptions into :class:`~tools.db.errors.DatabaseError` kinds.

PostgreSQL names every error with a SQLSTATE; the kind is read from it (exact code first, then its
two-character class). Anything that means "the server cannot be reached" — a refused or dropped
connection, a timeout while connecting, a server shutting down or out of connection slots —
becomes :class:`~tools.db.errors.DatabaseUnavailableError`.
"""

from __future__ import annotations

import asyncpg
from asyncpg.exceptions import _base as asyncpg_base

from .errors import ConflictError, DatabaseError, DatabaseUnavailableError, DbErrorKind

_BY_SQLSTATE = {
    "23505": DbErrorKind.UNIQUE_VIOLATION,
    "23503": DbErrorKind.FOREIGN_KEY,
    "23502": DbErrorKind.NOT_NULL,
    "23514": DbErrorKind.CHECK,
    "42601": DbErrorKind.SYNTAX,
    "42P01": DbErrorKind.UNDEFINED_TABLE,
    "42703": DbErrorKind.UNDEFINED_COLUMN,
    "42P02": DbErrorKind.PARAMETERS,  # undefined_parameter
    "42P18": DbErrorKind.PARAMETERS,  # indeterminate_datatype ("could not determine data type of $n")
    "08P01": DbErrorKind.PARAMETERS,  # protocol_violation: wrong number of bind values
    "25P02": DbErrorKind.TRANSACTION_ABORTED,
    "25006": DbErrorKind.READ_ONLY,
    "40001": DbErrorKind.CONFLICT,
    "40P01": DbErrorKind.CONFLICT,
    "55P03": DbErrorKind.BUSY,
    "53300": DbErrorKind.UNAVAILABLE,  # too_many_connections
    "57P01": DbErrorKind.UNAVAILABLE,  # admin_shutdown
    "57P02": DbErrorKind.UNAVAILABLE,  # crash_shutdown
    "57P03": DbErrorKind.UNAVAILABLE,  # cannot_connect_now
}
_BY_CLASS = {
    "08": DbErrorKind.UNAVAILABLE,  # connection exception
    "22": DbErrorKind.DATA,
}


def translate(exc: BaseException) -> DatabaseError:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None) or ""
        kind = _BY_SQLSTATE.get(sqlstate) or _BY_CLASS.get(sqlstate[:2], DbErrorKind.OTHER)
        if kind is DbErrorKind.UNAVAILABLE:
            return DatabaseUnavailableError(message, code=sqlstate)
        if kind is DbErrorKind.CONFLICT:
            return ConflictError(message, code=sqlstate)
        return DatabaseError(kind, message, code=sqlstate)
    if isinstance(exc, asyncpg_base.DataError):
        return DatabaseError(DbErrorKind.PARAMETERS, message)
    if isinstance(exc, OSError | TimeoutError):
        return DatabaseUnavailableError(f"{type(exc).__name__}: {message}")
    if isinstance(exc, asyncpg.InterfaceError):
        if "closed" in message or "connection was lost" in message:
            return DatabaseUnavailableError(message)
        return DatabaseError(DbErrorKind.MISUSE, message)
    return DatabaseError(DbErrorKind.OTHER, f"{type(exc).__name__}: {message}")
