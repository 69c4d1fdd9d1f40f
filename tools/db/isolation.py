"""Transaction isolation names shared by both engines (``DB_ISOLATION``, ``transaction(isolation=)``).

PostgreSQL runs a block at the named level; SQLite runs every block serializably (one writer holds
the write lock from ``BEGIN IMMEDIATE`` to ``COMMIT``), so there the name is only validated.
"""

from __future__ import annotations

from .errors import DatabaseError, DbErrorKind

DEFAULT_ISOLATION = "serializable"

ISOLATION_LEVELS = {
    "serializable": "SERIALIZABLE",
    "repeatable_read": "REPEATABLE READ",
    "read_committed": "READ COMMITTED",
}
"""The values of ``DB_ISOLATION`` and of ``transaction(isolation=...)``, and their SQL."""


def isolation_sql(isolation: str) -> str:
    """The SQL spelling of an isolation name; ``kind="misuse"`` for a name not in the list."""
    try:
        return ISOLATION_LEVELS[isolation]
    except KeyError:
        raise DatabaseError(
            DbErrorKind.MISUSE,
            f"isolation {isolation!r} is not one of {', '.join(ISOLATION_LEVELS)}",
        ) from None
