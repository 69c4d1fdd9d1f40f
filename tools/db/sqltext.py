"""A small SQL tokenizer: just enough to find placeholders, statements and the leading keyword.

Both engines need to know where SQL text is *not* code: inside string literals, quoted
identifiers, comments and (on PostgreSQL) dollar-quoted bodies, a ``$1`` or a ``;`` is just text.
The tokenizer yields the pieces in order; :mod:`tools.db.placeholders` and
:mod:`tools.db.migrations` build on it.

Dialect differences it respects:

- SQLite also quotes identifiers with backticks and ``[brackets]``; on PostgreSQL ``[`` is an
  array subscript (``arr[$1]`` holds a real placeholder), so brackets are only quotes on SQLite.
- PostgreSQL block comments nest, SQLite's do not; PostgreSQL has ``E'...'`` strings with
  backslash escapes and ``$tag$ ... $tag$`` dollar quoting.

An unterminated literal or comment runs to the end of the text; the engine reports the syntax
error itself, with its own position.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum


class Dialect(StrEnum):
    SQLITE = "sqlite"
    POSTGRES = "postgres"


class TokenKind(StrEnum):
    SPACE = "space"
    COMMENT = "comment"
    STRING = "string"
    """A string literal, a quoted identifier or a dollar-quoted body: opaque text."""
    PARAM = "param"
    WORD = "word"
    SEMICOLON = "semicolon"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str
    start: int


_WORD = r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*"
_COMMON = [
    ("SPACE", r"\s+"),
    ("LINE_COMMENT", r"--[^\n]*"),
    ("BLOCK_COMMENT", r"/\*"),
    ("PARAM", r"\$[0-9]+"),
    ("WORD", _WORD),
    ("SEMICOLON", r";"),
]
_SQLITE_QUOTES = [
    ("STRING", r"'(?:[^']|'')*'?"),
    ("STRING", r'"(?:[^"]|"")*"?'),
    ("STRING", r"`(?:[^`]|``)*`?"),
    ("STRING", r"\[[^\]]*\]?"),
]
_POSTGRES_QUOTES = [
    ("STRING", r"[Ee]'(?:[^'\\]|\\.|'')*'?"),
    ("STRING", r"'(?:[^']|'')*'?"),
    ("STRING", r'"(?:[^"]|"")*"?'),
    ("DOLLAR", r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$"),
]


def _compile(parts: list[tuple[str, str]]) -> re.Pattern[str]:
    # Group names must be unique, so number them; the kind is recovered from the prefix.
    alternatives = [f"(?P<{name}_{index}>{pattern})" for index, (name, pattern) in enumerate(parts)]
    return re.compile("|".join(alternatives), re.DOTALL)


# Order matters: quotes before words (E'..'), params and dollar quotes before OTHER.
_PATTERNS = {
    Dialect.SQLITE: _compile(_SQLITE_QUOTES + _COMMON),
    Dialect.POSTGRES: _compile(_POSTGRES_QUOTES + _COMMON),
}
_KIND_OF_GROUP = {
    "SPACE": TokenKind.SPACE,
    "LINE_COMMENT": TokenKind.COMMENT,
    "PARAM": TokenKind.PARAM,
    "WORD": TokenKind.WORD,
    "SEMICOLON": TokenKind.SEMICOLON,
    "STRING": TokenKind.STRING,
}


def tokenize(sql: str, dialect: Dialect) -> Iterator[Token]:
    """Yield every piece of ``sql`` in order; concatenating the texts gives ``sql`` back."""
    pattern = _PATTERNS[dialect]
    position, end = 0, len(sql)
    while position < end:
        match = pattern.match(sql, position)
        if match is None:
            yield Token(TokenKind.OTHER, sql[position], position)
            position += 1
            continue
        group = match.lastgroup or ""
        name = group.rsplit("_", 1)[0]
        if name == "BLOCK_COMMENT":
            stop = _block_comment_end(sql, position, nested=dialect is Dialect.POSTGRES)
            yield Token(TokenKind.COMMENT, sql[position:stop], position)
            position = stop
        elif name == "DOLLAR":
            tag = match.group()
            close = sql.find(tag, match.end())
            stop = end if close < 0 else close + len(tag)
            yield Token(TokenKind.STRING, sql[position:stop], position)
            position = stop
        else:
            yield Token(_KIND_OF_GROUP[name], match.group(), position)
            position = match.end()


def _block_comment_end(sql: str, start: int, *, nested: bool) -> int:
    """The index just past the comment opened at ``start`` (the end of the text if unclosed)."""
    if not nested:
        close = sql.find("*/", start + 2)
        return len(sql) if close < 0 else close + 2
    depth, position = 0, start
    while position < len(sql):
        pair = sql[position : position + 2]
        if pair == "/*":
            depth += 1
            position += 2
        elif pair == "*/":
            depth -= 1
            position += 2
            if depth == 0:
                return position
        else:
            position += 1
    return len(sql)


def significant(tokens: Iterator[Token]) -> Iterator[Token]:
    """The tokens that are code: no whitespace, no comments."""
    return (t for t in tokens if t.kind is not TokenKind.SPACE and t.kind is not TokenKind.COMMENT)


# -- statements ------------------------------------------------------------------------------------

_BLOCK_BODIES = frozenset({"TRIGGER", "FUNCTION", "PROCEDURE"})
_CREATE_MODIFIERS = frozenset({"OR", "REPLACE", "TEMP", "TEMPORARY", "CONSTRAINT"})


@dataclass(frozen=True, slots=True)
class Statement:
    text: str
    line: int
    """1-based line of the statement's first significant character in the original text."""


def split_statements(sql: str, dialect: Dialect) -> list[Statement]:
    """Split a script at the semicolons that end statements.

    Semicolons inside literals, comments and dollar quotes do not count, nor do those inside a
    ``BEGIN ... END`` body of ``CREATE TRIGGER`` (or a PostgreSQL ``BEGIN ATOMIC`` function); a
    ``CASE ... END`` inside such a body is balanced so its ``END`` does not close the body early.
    """
    statements: list[Statement] = []
    start: int | None = None
    words: list[str] = []  # the first few words, to recognise a block-bodied CREATE
    depth = 0

    def close(stop: int) -> None:
        nonlocal start, depth
        if start is not None:
            text = sql[start:stop].strip()
            if text:
                statements.append(Statement(text, sql.count("\n", 0, start) + 1))
        start, depth = None, 0
        words.clear()

    for token in tokenize(sql, dialect):
        if token.kind is TokenKind.SPACE or token.kind is TokenKind.COMMENT:
            continue
        if token.kind is TokenKind.SEMICOLON and depth == 0:
            close(token.start)
            continue
        if start is None:
            start = token.start
        if token.kind is not TokenKind.WORD:
            continue
        word = token.text.upper()
        if len(words) < 6:
            words.append(word)
        if not _has_block_body(words):
            continue
        if word in ("BEGIN", "CASE"):
            depth += 1
        elif word == "END" and depth > 0:
            depth -= 1
    close(len(sql))
    return statements


def _has_block_body(words: list[str]) -> bool:
    if not words or words[0] != "CREATE":
        return False
    for word in words[1:]:
        if word in _BLOCK_BODIES:
            return True
        if word not in _CREATE_MODIFIERS:
            return False
    return False
