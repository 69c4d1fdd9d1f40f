"""Transactions mean the same on both engines: a read-modify-write never loses an update.

The parity tests run on SQLite and PostgreSQL (the ``db`` fixture). The PostgreSQL-only tests force
the interleaving that loses an update under READ COMMITTED (both blocks read, then both write) and
check that the default isolation turns it into a ``ConflictError`` instead, and that ``transact``
runs the body again until it wins or its bound is reached.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import database_url
from tests.kit import started_tool
from tools.db.db_tool import DbTool
from tools.db.errors import ConflictError, DatabaseError, DbErrorKind

TASKS, ROUNDS = 12, 10


async def make_counter(db: DbTool) -> None:
    await db.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    await db.execute("INSERT INTO counter (id, n) VALUES (1, 0)")


async def read_then_write(tx: DbTool) -> int:
    """The lost-update shape: read the value into Python, yield, write value + 1 back."""
    n = await tx.scalar("SELECT n FROM counter WHERE id = 1")
    await asyncio.sleep(0)  # let the other tasks read the same value
    await tx.execute("UPDATE counter SET n = $1 WHERE id = 1", [n + 1])
    return int(n) + 1


# -- parity: both engines ---------------------------------------------------------------------------


async def test_concurrent_read_modify_write_through_transact_keeps_every_increment(db: DbTool) -> None:
    await make_counter(db)

    async def worker() -> None:
        for _ in range(ROUNDS):
            await db.transact(read_then_write, retries=200)

    await asyncio.gather(*(worker() for _ in range(TASKS)))
    assert await db.scalar("SELECT n FROM counter WHERE id = 1") == TASKS * ROUNDS
    if db.dialect == "sqlite":
        assert db.conflicts == 0  # one writer: blocks queue instead of conflicting


async def test_plain_blocks_either_commit_their_increment_or_raise_a_conflict(db: DbTool) -> None:
    await make_counter(db)
    outcomes: list[str] = []

    async def worker() -> None:
        for _ in range(ROUNDS):
            try:
                async with db.transaction() as tx:
                    await read_then_write(tx)
            except ConflictError as exc:
                assert exc.kind is DbErrorKind.CONFLICT and exc.attempts == 1
                outcomes.append("conflict")
            else:
                outcomes.append("committed")

    await asyncio.gather(*(worker() for _ in range(TASKS)))
    committed = outcomes.count("committed")
    assert await db.scalar("SELECT n FROM counter WHERE id = 1") == committed  # nothing lost silently
    if db.dialect == "sqlite":
        assert committed == TASKS * ROUNDS


async def test_transact_returns_the_result_and_commits(db: DbTool) -> None:
    await make_counter(db)
    assert await db.transact(read_then_write) == 1
    assert await db.scalar("SELECT n FROM counter WHERE id = 1") == 1


async def test_transact_does_not_retry_other_errors_and_rolls_back(db: DbTool) -> None:
    await make_counter(db)
    runs = 0

    async def body(tx: DbTool) -> None:
        nonlocal runs
        runs += 1
        await tx.execute("UPDATE counter SET n = 5 WHERE id = 1")
        await tx.execute("INSERT INTO counter (id, n) VALUES (1, 0)")  # duplicate key

    with pytest.raises(DatabaseError) as caught:
        await db.transact(body, retries=5)
    assert caught.value.kind is DbErrorKind.UNIQUE_VIOLATION
    assert runs == 1
    assert await db.scalar("SELECT n FROM counter WHERE id = 1") == 0


async def test_transact_inside_a_block_is_a_savepoint_of_it(db: DbTool) -> None:
    await make_counter(db)
    with pytest.raises(RuntimeError):
        async with db.transaction():
            await db.transact(read_then_write)
            assert await db.scalar("SELECT n FROM counter WHERE id = 1") == 1
            raise RuntimeError("roll the outer block back")
    assert await db.scalar("SELECT n FROM counter WHERE id = 1") == 0


async def test_an_unknown_isolation_is_misuse_on_both_engines(db: DbTool) -> None:
    with pytest.raises(DatabaseError) as caught:
        db.transaction(isolation="snapshot")
    assert caught.value.kind is DbErrorKind.MISUSE
    with pytest.raises(ValueError, match="retries"):
        await db.transact(read_then_write, retries=-1)


async def test_db_isolation_setting_is_checked_at_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///:memory:")
    monkeypatch.setenv("DB_ISOLATION", "chaos")
    with pytest.raises(ValueError, match="DB_ISOLATION"):
        async with started_tool(DbTool, tmp_path):
            pass


# -- PostgreSQL: the forced interleaving --------------------------------------------------------------


@pytest.fixture
async def pg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DbTool]:
    async with database_url("postgres") as url:
        monkeypatch.setenv("DATABASE_URL", url)
        monkeypatch.setenv("DB_TRANSACT_BACKOFF", "0.001")
        async with started_tool(DbTool, tmp_path) as tool:
            yield tool


async def interleave(db: DbTool, isolation: str | None) -> list[BaseException | None]:
    """Two blocks both read n, then the first writes and commits, then the second writes."""
    first_read, second_read, first_done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with db.transaction(isolation) as tx:
            n = await tx.scalar("SELECT n FROM counter WHERE id = 1")
            first_read.set()
            await second_read.wait()
            await tx.execute("UPDATE counter SET n = $1 WHERE id = 1", [n + 1])
        first_done.set()

    async def second() -> None:
        await first_read.wait()
        try:
            async with db.transaction(isolation) as tx:
                n = await tx.scalar("SELECT n FROM counter WHERE id = 1")
                second_read.set()
                await first_done.wait()
                await tx.execute("UPDATE counter SET n = $1 WHERE id = 1", [n + 1])
        finally:
            second_read.set()

    outcomes = await asyncio.wait_for(asyncio.gather(first(), second(), return_exceptions=True), 10)
    return list(outcomes)


async def test_read_committed_loses_the_update_which_is_why_it_is_not_the_default(pg: DbTool) -> None:
    await make_counter(pg)
    assert await interleave(pg, "read_committed") == [None, None]
    assert await pg.scalar("SELECT n FROM counter WHERE id = 1") == 1  # two commits, one increment


@pytest.mark.parametrize("isolation", [None, "repeatable_read"])
async def test_the_default_isolation_raises_a_conflict_instead(pg: DbTool, isolation: str | None) -> None:
    await make_counter(pg)
    first, second = await interleave(pg, isolation)
    assert first is None
    assert isinstance(second, ConflictError) and second.kind is DbErrorKind.CONFLICT
    assert second.code == "40001"
    assert await pg.scalar("SELECT n FROM counter WHERE id = 1") == 1  # one commit, one increment


async def test_transact_retries_a_conflict_until_the_body_wins(pg: DbTool) -> None:
    await make_counter(pg)
    runs = 0

    async def body(tx: DbTool) -> int:
        nonlocal runs
        runs += 1
        n = await tx.scalar("SELECT n FROM counter WHERE id = 1")
        if runs <= 2:  # someone else commits an increment between our read and our write
            await asyncio.create_task(pg.execute("UPDATE counter SET n = n + 1 WHERE id = 1"))
        await tx.execute("UPDATE counter SET n = $1 WHERE id = 1", [n + 1])
        return int(n) + 1

    assert await pg.transact(body, retries=5) == 3
    assert runs == 3 and pg.conflicts == 2
    assert await pg.scalar("SELECT n FROM counter WHERE id = 1") == 3


async def test_transact_gives_up_after_its_bound_with_a_typed_conflict(pg: DbTool) -> None:
    await make_counter(pg)
    runs = 0

    async def body(tx: DbTool) -> None:
        nonlocal runs
        runs += 1
        n = await tx.scalar("SELECT n FROM counter WHERE id = 1")
        await asyncio.create_task(pg.execute("UPDATE counter SET n = n + 1 WHERE id = 1"))
        await tx.execute("UPDATE counter SET n = $1 WHERE id = 1", [n + 100])

    with pytest.raises(ConflictError) as caught:
        await pg.transact(body, retries=2)
    assert runs == 3 and caught.value.attempts == 3
    assert "ran 3 times" in str(caught.value)
    assert await pg.scalar("SELECT n FROM counter WHERE id = 1") == 3  # only the outside increments


async def test_transact_retries_a_body_that_swallowed_the_conflict(pg: DbTool) -> None:
    await make_counter(pg)
    runs = 0

    async def body(tx: DbTool) -> None:
        nonlocal runs
        runs += 1
        n = await tx.scalar("SELECT n FROM counter WHERE id = 1")
        if runs == 1:
            await asyncio.create_task(pg.execute("UPDATE counter SET n = n + 1 WHERE id = 1"))
        try:
            await tx.execute("UPDATE counter SET n = $1 WHERE id = 1", [n + 1])
        except ConflictError:
            pass  # the block is aborted all the same: its exit raises, and transact runs it again

    await pg.transact(body)
    assert runs == 2
    assert await pg.scalar("SELECT n FROM counter WHERE id = 1") == 2
