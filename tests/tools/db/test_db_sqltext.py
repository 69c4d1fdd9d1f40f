"""The SQL tokenizer, statement splitting and placeholder analysis (no database needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.db.errors import DatabaseError, DbErrorKind
from tools.db.placeholders import check_params, prepare
from tools.db.sqltext import Dialect, TokenKind, split_statements, tokenize

SQLITE, POSTGRES = Dialect.SQLITE, Dialect.POSTGRES


@given(st.text(alphabet=st.sampled_from("ab $1;'\"`[]-/*\nE\\"), max_size=60), st.sampled_from(list(Dialect)))
def test_tokens_always_concatenate_back_to_the_text(sql: str, dialect: Dialect) -> None:
    assert "".join(token.text for token in tokenize(sql, dialect)) == sql


def params_in(sql: str, dialect: Dialect) -> list[str]:
    return [t.text for t in tokenize(sql, dialect) if t.kind is TokenKind.PARAM]


@pytest.mark.parametrize("dialect", list(Dialect))
def test_placeholders_outside_quotes_and_comments_only(dialect: Dialect) -> None:
    sql = "SELECT $1, '$2', \"$3\" -- $4\n/* $5 */ FROM t WHERE a = $6"
    assert params_in(sql, dialect) == ["$1", "$6"]


def test_dialect_specific_quoting() -> None:
    assert params_in("SELECT [$1], `$2`, $3", SQLITE) == ["$3"]
    assert params_in("SELECT arr[$1], E'it\\'s $2', $q$ $3 $q$, $$ $4 $$", POSTGRES) == ["$1"]
    assert params_in("/* outer /* inner */ $1 */ $2", POSTGRES) == ["$2"]
    assert params_in("/* outer /* inner */ $1 */ $2", SQLITE) == ["$1", "$2"]


def test_sqlite_placeholders_become_numbered_parameters() -> None:
    prepared = prepare("SELECT $2, '$1', $1, $2 -- $3", SQLITE)
    assert (prepared.text, prepared.count, prepared.problem) == ("SELECT ?2, '$1', ?1, ?2 -- $3", 2, None)
    assert prepare("SELECT $2, $1", POSTGRES).text == "SELECT $2, $1"
    assert prepare("SELECT $1", SQLITE) is prepare("SELECT $1", SQLITE)  # analysed once


@pytest.mark.parametrize(
    ("sql", "leading", "read"),
    [
        ("  -- note\n select 1", "SELECT", True),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "WITH", True),
        ("INSERT INTO t VALUES (1)", "INSERT", False),
        ("PRAGMA foreign_keys", "PRAGMA", False),
        ("(SELECT 1)", "(", False),
    ],
)
def test_leading_keyword_decides_what_may_run_on_a_reader(sql: str, leading: str, read: bool) -> None:
    prepared = prepare(sql, SQLITE)
    assert (prepared.leading, prepared.maybe_read_only) == (leading, read)


def test_check_params_accepts_exact_sequences_only() -> None:
    prepared = prepare("SELECT $1, $2", POSTGRES)
    check_params(prepared, (1, 2))
    check_params(prepared, [1, 2])
    for wrong in ((1,), (1, 2, 3), "ab", b"ab", {1: 1, 2: 2}):
        with pytest.raises(DatabaseError) as caught:
            check_params(prepared, wrong)  # type: ignore[arg-type]
        assert caught.value.kind is DbErrorKind.PARAMETERS


def test_statements_split_at_their_own_semicolons() -> None:
    script = """
        -- leading comment; ignored
        CREATE TABLE a (x TEXT DEFAULT 'a;b');

        CREATE TRIGGER t AFTER INSERT ON a BEGIN
            UPDATE a SET x = CASE WHEN new.x = ';' THEN 'semi' END;
            DELETE FROM a WHERE x IS NULL;
        END;
        INSERT INTO a VALUES ('end') /* trailing; comment */
    """
    statements = split_statements(script, SQLITE)
    assert [s.line for s in statements] == [3, 5, 9]
    assert statements[1].text.startswith("CREATE TRIGGER t") and statements[1].text.endswith("END")
    assert statements[2].text == "INSERT INTO a VALUES ('end') /* trailing; comment */"


def test_postgres_function_bodies_stay_whole() -> None:
    script = (
        "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $fn$ BEGIN RETURN 1; END; $fn$;\n"
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END;\n"
        "SELECT f();"
    )
    assert [s.text[:22] for s in split_statements(script, POSTGRES)] == [
        "CREATE OR REPLACE FUNC",
        "CREATE FUNCTION g() RE",
        "SELECT f()",
    ]


def test_begin_outside_a_block_body_does_not_swallow_the_script() -> None:
    assert len(split_statements("SELECT 1; CREATE TABLE begin_x (end_y INTEGER); SELECT 2;", SQLITE)) == 3
