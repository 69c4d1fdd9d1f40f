"""The db contract, run unchanged on SQLite and on PostgreSQL (the ``db`` fixture is parametrized).

Only the DDL for an auto-numbered key differs per engine (``pk()``); every statement a plugin would
send is the same text on both.
"""

from __future__ import annotations

import asyncio

import pytest

from core.errors import ToolUnavailableError
from tools.db.db_tool import DbTool
from tools.db.errors import DatabaseError, DbErrorKind


def pk(db: DbTool) -> str:
    return "INTEGER PRIMARY KEY" if db.dialect == "sqlite" else "SERIAL PRIMARY KEY"


async def make_items(db: DbTool) -> None:
    await db.execute(
        f"CREATE TABLE items (id {pk(db)}, name TEXT NOT NULL UNIQUE, qty INTEGER NOT NULL CHECK (qty >= 0))"
    )


async def make_parent_child(db: DbTool, *, deferred: bool = False) -> None:
    await db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    deferral = " DEFERRABLE INITIALLY DEFERRED" if deferred else ""
    await db.execute(
        "CREATE TABLE child (id INTEGER PRIMARY KEY, "
        f"parent_id INTEGER NOT NULL REFERENCES parent (id){deferral})"
    )


async def names(db: DbTool) -> list[str]:
    return [row["name"] for row in await db.query("SELECT name FROM items ORDER BY name")]


# -- CRUD and return values ----------------------------------------------------------------------


async def test_crud_round_trip_returns_counts_and_dicts(db: DbTool) -> None:
    await make_items(db)
    assert await db.execute("INSERT INTO items (name, qty) VALUES ($1, $2), ($3, $4)", ["a", 1, "b", 2]) == 2
    assert await db.query("SELECT name, qty FROM items ORDER BY name") == [
        {"name": "a", "qty": 1},
        {"name": "b", "qty": 2},
    ]
    assert await db.execute("UPDATE items SET qty = qty + 10 WHERE qty < $1", [5]) == 2
    assert await db.query_one("SELECT qty FROM items WHERE name = $1", ["b"]) == {"qty": 12}
    assert await db.execute("DELETE FROM items WHERE name = $1", ["a"]) == 1
    assert await db.execute("DELETE FROM items WHERE name = $1", ["nobody"]) == 0
    assert await db.scalar("SELECT count(*) FROM items") == 1


async def test_empty_results(db: DbTool) -> None:
    await make_items(db)
    assert await db.query("SELECT * FROM items") == []
    assert await db.query_one("SELECT * FROM items WHERE id = $1", [1]) is None
    assert await db.scalar("SELECT name FROM items WHERE id = $1", [1]) is None


async def test_returning_gives_ids_and_execute_counts_returned_rows(db: DbTool) -> None:
    await make_items(db)
    first = await db.scalar("INSERT INTO items (name, qty) VALUES ($1, 0) RETURNING id", ["a"])
    row = await db.query_one("INSERT INTO items (name, qty) VALUES ($1, 0) RETURNING id, name", ["b"])
    assert row is not None and row["name"] == "b" and row["id"] > first
    many = await db.query("INSERT INTO items (name, qty) VALUES ('c', 0), ('d', 0) RETURNING name")
    assert sorted(r["name"] for r in many) == ["c", "d"]
    assert await db.execute("UPDATE items SET qty = 1 RETURNING id") == 4
    assert await db.execute("SELECT name FROM items") == 4


async def test_executemany_inserts_every_row_atomically(db: DbTool) -> None:
    await make_items(db)
    await db.executemany("INSERT INTO items (name, qty) VALUES ($1, $2)", [("a", 1), ["b", 2]])
    with pytest.raises(DatabaseError) as caught:
        await db.executemany("INSERT INTO items (name, qty) VALUES ($1, $2)", [("c", 1), ("a", 9)])
    assert caught.value.kind is DbErrorKind.UNIQUE_VIOLATION
    assert await names(db) == ["a", "b"]  # "c" was rolled back with the failing row


# -- placeholders --------------------------------------------------------------------------------


async def test_placeholder_repeated_and_out_of_order(db: DbTool) -> None:
    await make_items(db)
    await db.execute("INSERT INTO items (name, qty) VALUES ($2, $1)", [3, "a"])
    row = await db.query_one("SELECT $1 || name || $1 AS framed, qty * $2 AS doubled FROM items", ["*", 2])
    assert row == {"framed": "*a*", "doubled": 6}


async def test_placeholder_text_inside_literals_comments_and_identifiers_is_left_alone(db: DbTool) -> None:
    await db.execute('CREATE TABLE "odd$1" (id INTEGER PRIMARY KEY, note TEXT)')
    await db.execute(
        """INSERT INTO "odd$1" (id, note) -- $2 in a line comment
           VALUES ($1, 'costs $2; really') /* and $3 in a block comment */""",
        [1],
    )
    assert await db.query("SELECT id, note, '$1' AS literal FROM \"odd$1\" WHERE id = $1", [1]) == [
        {"id": 1, "note": "costs $2; really", "literal": "$1"}
    ]


@pytest.mark.parametrize(
    ("sql", "params", "fragment"),
    [
        ("SELECT $1, $2", [1], "takes 2 values ($1..$2) but 1 value was passed"),
        ("SELECT $1", [1, 2], "takes 1 value ($1..$1) but 2 values were passed"),
        ("SELECT 1", [1], "takes no values but 1 value was passed"),
        ("SELECT $1, $3", [1, 2, 3], "$2 is never used"),
        ("SELECT $0", [1], "numbered from $1"),
        ("SELECT $1", "a", "must be a list or tuple"),
        ("SELECT $1", {"a": 1}, "must be a list or tuple"),
    ],
)
async def test_placeholder_mistakes_are_errors_before_the_engine_sees_them(
    db: DbTool, sql: str, params: object, fragment: str
) -> None:
    with pytest.raises(DatabaseError) as caught:
        await db.query(sql, params)  # type: ignore[arg-type]
    assert caught.value.kind is DbErrorKind.PARAMETERS
    assert fragment in str(caught.value)


async def test_transaction_control_and_scripts_are_refused(db: DbTool) -> None:
    for sql in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT x", "SELECT 1; SELECT 2"):
        with pytest.raises(DatabaseError) as caught:
            await db.execute(sql)
        assert caught.value.kind is DbErrorKind.MISUSE, sql
    assert await db.scalar("SELECT 1;") == 1  # one trailing semicolon is still one statement


# -- error kinds ---------------------------------------------------------------------------------


async def test_constraint_errors_have_the_same_kind_on_every_engine(db: DbTool) -> None:
    await make_items(db)
    await make_parent_child(db)
    await db.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
    cases = [
        ("INSERT INTO items (name, qty) VALUES ('a', 2)", DbErrorKind.UNIQUE_VIOLATION),
        ("INSERT INTO items (name, qty) VALUES (NULL, 2)", DbErrorKind.NOT_NULL),
        ("INSERT INTO items (name, qty) VALUES ('z', -1)", DbErrorKind.CHECK),
        ("INSERT INTO child (id, parent_id) VALUES (1, 42)", DbErrorKind.FOREIGN_KEY),
        ("SELEC 1", DbErrorKind.SYNTAX),
        ("SELECT * FROM nowhere", DbErrorKind.UNDEFINED_TABLE),
        ("SELECT missing_column FROM items", DbErrorKind.UNDEFINED_COLUMN),
    ]
    for sql, kind in cases:
        with pytest.raises(DatabaseError) as caught:
            await db.execute(sql)
        assert caught.value.kind is kind, (sql, caught.value)
        assert not isinstance(caught.value, ToolUnavailableError)
        assert caught.value.__cause__ is not None  # the engine's exception is kept for the logs


# -- transactions --------------------------------------------------------------------------------


async def test_transaction_commits_and_yields_the_tool(db: DbTool) -> None:
    await make_items(db)
    async with db.transaction() as tx:
        assert tx is db
        await tx.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
        await db.execute("INSERT INTO items (name, qty) VALUES ('b', 1)")
    assert await names(db) == ["a", "b"]


async def test_exception_rolls_the_transaction_back(db: DbTool) -> None:
    await make_items(db)
    with pytest.raises(RuntimeError):
        async with db.transaction():
            await db.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
            raise RuntimeError("boom")
    assert await names(db) == []


async def test_nested_blocks_are_savepoints(db: DbTool) -> None:
    await make_items(db)
    async with db.transaction():
        await db.execute("INSERT INTO items (name, qty) VALUES ('outer', 1)")
        with pytest.raises(RuntimeError):
            async with db.transaction():
                await db.execute("INSERT INTO items (name, qty) VALUES ('inner', 1)")
                raise RuntimeError("undo the inner block only")
        async with db.transaction():
            async with db.transaction():
                await db.execute("INSERT INTO items (name, qty) VALUES ('deep', 1)")
    assert await names(db) == ["deep", "outer"]
    with pytest.raises(RuntimeError):
        async with db.transaction():
            async with db.transaction():
                await db.execute("INSERT INTO items (name, qty) VALUES ('gone', 1)")
            raise RuntimeError("the outer rollback takes the released savepoint with it")
    assert await names(db) == ["deep", "outer"]


async def test_a_failed_statement_aborts_its_block_on_both_engines(db: DbTool) -> None:
    await make_items(db)
    await db.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
    with pytest.raises(DatabaseError) as caught:
        async with db.transaction():
            await db.execute("INSERT INTO items (name, qty) VALUES ('b', 1)")
            with pytest.raises(DatabaseError):
                await db.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
            with pytest.raises(DatabaseError) as later:
                await db.execute("INSERT INTO items (name, qty) VALUES ('c', 1)")
            assert later.value.kind is DbErrorKind.TRANSACTION_ABORTED
    assert caught.value.kind is DbErrorKind.TRANSACTION_ABORTED  # leaving normally does not commit
    assert await names(db) == ["a"]


async def test_a_nested_block_recovers_from_a_failed_statement(db: DbTool) -> None:
    await make_items(db)
    await db.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
    async with db.transaction():
        await db.execute("INSERT INTO items (name, qty) VALUES ('b', 1)")
        with pytest.raises(DatabaseError) as caught:
            async with db.transaction():
                await db.execute("INSERT INTO items (name, qty) VALUES ('a', 1)")
        assert caught.value.kind is DbErrorKind.UNIQUE_VIOLATION
        await db.execute("INSERT INTO items (name, qty) VALUES ('c', 1)")
    assert await names(db) == ["a", "b", "c"]


async def test_failing_commit_raises_and_leaves_the_connection_clean(db: DbTool) -> None:
    await make_parent_child(db, deferred=True)
    with pytest.raises(DatabaseError) as caught:
        async with db.transaction():
            await db.execute("INSERT INTO child (id, parent_id) VALUES (1, 99)")  # checked at COMMIT
    assert caught.value.kind is DbErrorKind.FOREIGN_KEY
    assert await db.scalar("SELECT count(*) FROM child") == 0
    async with db.transaction():  # the next transaction starts on a clean connection
        await db.execute("INSERT INTO parent (id) VALUES (99)")
        await db.execute("INSERT INTO child (id, parent_id) VALUES (1, 99)")
    assert await db.scalar("SELECT count(*) FROM child") == 1


async def test_failing_commit_of_a_nested_block_leaves_the_outer_usable(db: DbTool) -> None:
    await make_items(db)
    async with db.transaction():
        await db.execute("INSERT INTO items (name, qty) VALUES ('kept', 1)")
        with pytest.raises(DatabaseError):
            async with db.transaction():
                with pytest.raises(DatabaseError):
                    await db.execute("INSERT INTO items (name, qty) VALUES ('kept', 2)")
        # the block that swallowed its own error raised transaction_aborted on exit, and only it rolled back
        await db.execute("INSERT INTO items (name, qty) VALUES ('after', 1)")
    assert await names(db) == ["after", "kept"]


# -- concurrency and isolation --------------------------------------------------------------------


async def test_concurrent_increments_in_transactions_are_exact(db: DbTool) -> None:
    await db.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
    await db.execute("INSERT INTO counter (id, value) VALUES (1, 0)")

    async def increment(tx: DbTool) -> None:
        await tx.execute("UPDATE counter SET value = value + 1 WHERE id = 1")
        assert await tx.scalar("SELECT value FROM counter WHERE id = 1") >= 1

    async def worker() -> None:
        for _ in range(100):  # SERIALIZABLE on PostgreSQL: a clash is a conflict, transact retries it
            await db.transact(increment, retries=1000)

    await asyncio.gather(*(worker() for _ in range(50)))
    assert await db.scalar("SELECT value FROM counter WHERE id = 1") == 5000


async def test_uncommitted_rows_are_invisible_to_other_tasks_and_to_children(db: DbTool) -> None:
    await make_items(db)
    inserted = asyncio.Event()
    release = asyncio.Event()
    seen: dict[str, object] = {}

    async def writer() -> None:
        async with db.transaction():
            await db.execute("INSERT INTO items (name, qty) VALUES ('pending', 1)")
            seen["owner"] = await db.scalar("SELECT count(*) FROM items")
            # a task started inside the block does not join it, although it copies the context
            seen["child"] = await asyncio.create_task(db.scalar("SELECT count(*) FROM items"))
            inserted.set()
            await release.wait()

    task = asyncio.create_task(writer())
    await inserted.wait()
    seen["other"] = await db.scalar("SELECT count(*) FROM items")
    release.set()
    await task
    assert seen == {"owner": 1, "child": 0, "other": 0}
    assert await db.scalar("SELECT count(*) FROM items") == 1


async def test_health_check(db: DbTool) -> None:
    assert await db.health_check() is True


# -- deferred statements --------------------------------------------------------------------------


async def test_deferred_statements_run_in_order_before_the_next_statement_and_at_commit(db: DbTool) -> None:
    await make_items(db)
    async with db.transaction() as tx:
        tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["a", 1])
        tx.defer("UPDATE items SET qty = qty + $1 WHERE name = $2", [10, "a"])
        tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["b", 2])
        tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["c", 3])
        # the next statement of the block sees them, in the order they were deferred
        assert await tx.query("SELECT name, qty FROM items ORDER BY name") == [
            {"name": "a", "qty": 11},
            {"name": "b", "qty": 2},
            {"name": "c", "qty": 3},
        ]
        for i in range(50):
            tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", [f"n{i}", i])
    assert await db.scalar("SELECT count(*) FROM items") == 53


async def test_deferred_runs_of_statements_that_return_rows_still_run_each(db: DbTool) -> None:
    """A run of one write is sent as a batch; one that returns rows (``RETURNING``, a ``SELECT``)
    must still run, in its place in the order."""
    await make_items(db)
    async with db.transaction() as tx:
        for i in range(3):
            tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2) RETURNING id", [f"r{i}", i])
        tx.defer("SELECT count(*) FROM items", [])
        tx.defer("SELECT count(*) FROM items", [])
        for i in range(3):
            tx.defer("UPDATE items SET qty = qty + $1 WHERE name = $2", [100, f"r{i}"])
    assert await db.query("SELECT name, qty FROM items ORDER BY name") == [
        {"name": f"r{i}", "qty": 100 + i} for i in range(3)
    ]


async def test_a_failing_deferred_statement_aborts_its_block(db: DbTool) -> None:
    await make_items(db)
    with pytest.raises(DatabaseError) as caught:
        async with db.transaction() as tx:
            tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["a", 1])
            tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["a", 2])  # duplicate name
    assert caught.value.kind is DbErrorKind.UNIQUE_VIOLATION  # raised by the block's end
    assert await db.scalar("SELECT count(*) FROM items") == 0
    with pytest.raises(DatabaseError) as raised_by_next:
        async with db.transaction() as tx:
            tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["b", -1])  # check fails
            await tx.execute("INSERT INTO items (name, qty) VALUES ($1, $2)", ["c", 1])
    assert raised_by_next.value.kind is DbErrorKind.CHECK
    assert await db.scalar("SELECT count(*) FROM items") == 0


async def test_a_block_that_rolls_back_never_runs_what_it_deferred(db: DbTool) -> None:
    await make_items(db)
    async with db.transaction() as tx:
        tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["kept", 1])
        with pytest.raises(RuntimeError):
            async with tx.transaction():
                tx.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["dropped", 1])
                raise RuntimeError("roll this block back")
    assert await names(db) == ["kept"]


async def test_defer_outside_a_block_is_misuse(db: DbTool) -> None:
    await make_items(db)
    with pytest.raises(DatabaseError) as caught:
        db.defer("INSERT INTO items (name, qty) VALUES ($1, $2)", ["a", 1])
    assert caught.value.kind is DbErrorKind.MISUSE
    with pytest.raises(DatabaseError) as wrong:
        async with db.transaction() as tx:
            tx.defer("INSERT INTO items (name, qty) VALUES ($1)", ["a", 1])  # placeholder mismatch
    assert wrong.value.kind is DbErrorKind.PARAMETERS
    assert await db.scalar("SELECT count(*) FROM items") == 0
