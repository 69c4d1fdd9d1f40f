"""What only the SQLite engine has: the file, its pragmas, the write lock, busy retries, crashes."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kit import bound_tool, started_tool
from tools.db import sqlite as sqlite_engine
from tools.db.db_tool import DbTool
from tools.db.errors import DatabaseError, DatabaseUnavailableError, DbErrorKind


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
async def db(root: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DbTool]:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/test.db")
    async with started_tool(DbTool, root) as tool:
        await tool.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        yield tool


# -- the file and its settings --------------------------------------------------------------------


async def test_default_database_is_created_under_the_project_root(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    async with started_tool(DbTool, root) as db:
        assert db.dialect == "sqlite"
        assert await db.scalar("SELECT 1") == 1
    assert (root / "data" / "keel.db").is_file()


async def test_relative_and_absolute_paths(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///nested/dir/app.db")
    async with started_tool(DbTool, root):
        pass
    assert (root / "nested" / "dir" / "app.db").is_file()
    absolute = tmp_path / "elsewhere" / "abs.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{absolute}")
    async with started_tool(DbTool, root):
        pass
    assert absolute.is_file()


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("sqlite://relative.db", "sqlite:///relative/path.db"),
        ("mysql://x", "scheme 'mysql' is not supported"),
    ],
)
async def test_a_bad_url_fails_setup_with_what_to_write(
    root: Path, monkeypatch: pytest.MonkeyPatch, url: str, fragment: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(ValueError, match="DATABASE_URL") as caught:
        await bound_tool(DbTool, root).setup()
    assert fragment in str(caught.value)


async def test_pragmas(db: DbTool) -> None:
    assert await db.scalar("PRAGMA journal_mode") == "wal"
    assert await db.scalar("PRAGMA foreign_keys") == 1
    assert await db.scalar("PRAGMA busy_timeout") == 5000
    assert await db.scalar("PRAGMA synchronous") == 1  # NORMAL


async def test_unopenable_file_is_unavailable(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "data").write_text("a file where the folder should be")
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/keel.db")
    with pytest.raises(DatabaseUnavailableError):
        await bound_tool(DbTool, root).setup()


async def test_memory_database_serialises_readers_behind_the_writer(
    monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///:memory:")
    async with started_tool(DbTool, root) as db:
        await db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
        inside, release = asyncio.Event(), asyncio.Event()

        async def writer() -> None:
            async with db.transaction():
                await db.execute("INSERT INTO items (id) VALUES (1)")
                inside.set()
                await release.wait()
                raise RuntimeError("roll back")

        task = asyncio.create_task(writer())
        await inside.wait()
        reader = asyncio.create_task(db.scalar("SELECT count(*) FROM items"))  # issued mid-transaction
        release.set()
        with pytest.raises(RuntimeError):
            await task
        # one connection holds everything, so the read waited for the rollback instead of seeing the row
        assert await reader == 0


# -- routing between the writer and the readers -----------------------------------------------------


async def test_a_with_statement_that_writes_is_rerouted_to_the_writer(db: DbTool) -> None:
    rows = await db.query(
        "WITH new (name) AS (VALUES ('a'), ('b')) "
        "INSERT INTO items (name) SELECT name FROM new RETURNING name"
    )
    assert sorted(r["name"] for r in rows) == ["a", "b"]
    assert await db.scalar("WITH c AS (SELECT count(*) AS n FROM items) SELECT n FROM c") == 2


async def test_a_child_task_cannot_write_while_its_parent_holds_the_transaction(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/test.db")
    monkeypatch.setenv("DB_BUSY_TIMEOUT", "0.2")
    async with started_tool(DbTool, root) as db:
        await db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
        with pytest.raises(DatabaseError) as caught:
            async with db.transaction():
                await db.execute("INSERT INTO items (id) VALUES (1)")
                await asyncio.create_task(db.execute("INSERT INTO items (id) VALUES (2)"))
        assert caught.value.kind is DbErrorKind.BUSY
        assert "does not join" in str(caught.value)
        assert await db.scalar("SELECT count(*) FROM items") == 0  # the parent rolled back too
        await db.execute("INSERT INTO items (id) VALUES (3)")  # and the lock is free again


async def test_cancelling_a_task_inside_a_transaction_rolls_it_back(db: DbTool) -> None:
    inside = asyncio.Event()

    async def writer() -> None:
        async with db.transaction():
            await db.execute("INSERT INTO items (name) VALUES ('doomed')")
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(writer())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with db.transaction():
        await db.execute("INSERT INTO items (name) VALUES ('next')")
    assert await db.query("SELECT name FROM items") == [{"name": "next"}]


# -- another process holding the file lock --------------------------------------------------------


async def test_busy_is_retried_with_backoff_until_the_lock_is_free(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/test.db")
    monkeypatch.setenv("DB_BUSY_TIMEOUT", "0.01")
    async with started_tool(DbTool, root) as db:
        await db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
        other = sqlite3.connect(root / "data" / "test.db", isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        waits: list[int] = []

        def backoff(attempt: int) -> None:  # runs in the writer's thread between attempts
            waits.append(attempt)
            if attempt == 1:
                other.execute("COMMIT")

        monkeypatch.setattr(sqlite_engine, "_backoff", backoff)
        assert await db.execute("INSERT INTO items (id) VALUES (1)") == 1
        other.close()
        assert waits == [0, 1]  # busy twice, then the third attempt went through


async def test_busy_beyond_the_retries_is_a_busy_error(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/test.db")
    monkeypatch.setenv("DB_BUSY_TIMEOUT", "0.01")
    async with started_tool(DbTool, root) as db:
        await db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
        waits: list[int] = []
        monkeypatch.setattr(sqlite_engine, "_backoff", waits.append)
        other = sqlite3.connect(root / "data" / "test.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(DatabaseError) as caught:
                async with db.transaction():
                    pass
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert caught.value.kind is DbErrorKind.BUSY
        assert waits == [0, 1, 2]
        async with db.transaction():  # nothing was left half-open by the failed BEGIN
            await db.execute("INSERT INTO items (id) VALUES (1)")
