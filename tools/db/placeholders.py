"""``$1, $2, ...`` placeholders on both engines, checked the same way before any SQL runs.

Plugins write PostgreSQL-style placeholders. On SQLite each ``$n`` becomes ``?n`` (SQLite's
numbered parameter), so a value may be used twice or out of order exactly as on PostgreSQL; a
``$1`` inside a string literal, a quoted identifier or a comment is left alone because the text
is tokenized, not searched.

The rules, identical on both engines (a mistake is ``DatabaseError(kind="parameters")``):

- the values passed must be exactly ``$1 .. $N`` where ``N`` is the highest placeholder: one value
  too many or too few is an error, never a silent NULL or an ignored value;
- every index up to ``N`` must appear (PostgreSQL cannot type an unused parameter);
- ``params`` is a sequence (list or tuple), not a string or a mapping.

The analysis of one SQL text is cached, so a statement run in a loop is tokenized once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .errors import DatabaseError, DbErrorKind
from .sqltext import Dialect, TokenKind, split_statements, tokenize

TRANSACTION_CONTROL = frozenset(
    {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "START", "ABORT"}
)
READ_KEYWORDS = frozenset({"SELECT", "WITH", "VALUES", "EXPLAIN"})


@dataclass(frozen=True, slots=True)
class PreparedSql:
    """One SQL text, analysed once: what to send and what it expects."""

    text: str
    """The text to hand to the engine (placeholders rewritten for SQLite)."""
    count: int
    """How many values it takes: the highest ``$n``."""
    problem: tuple[DbErrorKind, str] | None
    """A mistake found in the text itself (a gap in the numbering, several statements ...)."""
    leading: str
    """The first keyword, upper-cased (``SELECT``, ``INSERT`` ...), or ``""``."""
    maybe_read_only: bool
    """Worth trying on a read-only connection (a ``WITH`` may still turn out to write)."""


@lru_cache(maxsize=4096)
def prepare(sql: str, dialect: Dialect) -> PreparedSql:
    """Analyse ``sql`` for ``dialect``; the result is cached per (text, dialect)."""
    pieces: list[str] = []
    used: set[int] = set()
    leading = ""
    for token in tokenize(sql, dialect):
        if token.kind is TokenKind.PARAM:
            index = int(token.text[1:])
            used.add(index)
            pieces.append(f"?{index}" if dialect is Dialect.SQLITE else token.text)
            continue
        if not leading and token.kind not in (TokenKind.SPACE, TokenKind.COMMENT):
            leading = token.text.upper() if token.kind is TokenKind.WORD else token.text
        pieces.append(token.text)
    count = max(used, default=0)
    problem: tuple[DbErrorKind, str] | None = None
    missing = sorted(set(range(1, count + 1)) - used)
    if 0 in used:
        problem = (DbErrorKind.PARAMETERS, "placeholders are numbered from $1; $0 is not a placeholder")
    elif missing:
        problem = (
            DbErrorKind.PARAMETERS,
            f"${missing[0]} is never used although ${count} is (number placeholders $1..$n without gaps)",
        )
    elif leading in TRANSACTION_CONTROL:
        problem = (DbErrorKind.MISUSE, f"{leading} is managed by db.transaction(); do not send it yourself")
    elif len(split_statements(sql, dialect)) > 1:
        problem = (DbErrorKind.MISUSE, "one statement per call (a script belongs in a migration file)")
    return PreparedSql("".join(pieces), count, problem, leading, leading in READ_KEYWORDS)


def check_params(prepared: PreparedSql, params: Sequence[Any]) -> None:
    """Raise ``DatabaseError`` unless ``params`` fits ``prepared`` exactly (cheap when it does)."""
    if prepared.problem is not None:
        raise DatabaseError(*prepared.problem)
    kind = type(params)
    if kind is not tuple and kind is not list:
        if isinstance(params, str | bytes | bytearray) or not isinstance(params, Sequence):
            raise DatabaseError(
                DbErrorKind.PARAMETERS,
                f"params must be a list or tuple of values for $1..$n, got {kind.__name__}",
            )
    if len(params) != prepared.count:
        raise DatabaseError(DbErrorKind.PARAMETERS, _count_mismatch(prepared.count, len(params)))


def _count_mismatch(expected: int, given: int) -> str:
    takes = "takes no values" if expected == 0 else f"takes {_values(expected)} ($1..${expected})"
    return f"the statement {takes} but {_values(given)} {'was' if given == 1 else 'were'} passed"


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"
