"""``core.sqlite_thread``: one SQLite connection in a thread of its own, running jobs handed over
from the event loop in order and rolling back what a failed job left open; and ``connect_file``,
the shared-file connection the tools give it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from core.sqlite_thread import SqliteThread, connect_file

NAME = "keel-test-sqlite"
SCHEMA = "CREATE TABLE IF NOT EXISTS notes (body TEXT)"


def connector(path: Path) -> Callable[[], sqlite3.Connection]:
    return lambda: connect_file(str(path), schema=SCHEMA)


def insert(connection: sqlite3.Connection, body: str) -> str:
    connection.execute("INSERT INTO notes VALUES (?)", (body,))
    return threading.current_thread().name


def bodies(connection: sqlite3.Connection) -> list[str]:
    return [row[0] for row in connection.execute("SELECT body FROM notes ORDER BY rowid")]


def begin_and_insert(connection: sqlite3.Connection, body: str) -> None:
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO notes VALUES (?)", (body,))


def begin_insert_and_fail(connection: sqlite3.Connection, body: str) -> None:
    begin_and_insert(connection, body)
    raise ValueError(f"refused {body}")


def read_file(path: Path) -> list[str]:
    check = sqlite3.connect(path)
    try:
        return bodies(check)
    finally:
        check.close()


@pytest.fixture
async def sqlite_thread(tmp_path: Path) -> AsyncIterator[SqliteThread]:
    thread = SqliteThread(NAME, connector(tmp_path / "t.db"))
    await thread.start()
    try:
        yield thread
    finally:
        await thread.stop()


async def test_jobs_run_in_the_named_thread_in_the_order_they_were_submitted(
    sqlite_thread: SqliteThread,
) -> None:
    names = await asyncio.gather(*(sqlite_thread.run(insert, str(n)) for n in range(20)))
    assert set(names) == {NAME}
    assert await sqlite_thread.run(bodies) == [str(n) for n in range(20)]


async def test_a_job_that_raises_gives_its_error_to_the_caller_and_its_transaction_is_rolled_back(
    sqlite_thread: SqliteThread,
) -> None:
    with pytest.raises(ValueError, match="refused lost"):
        await sqlite_thread.run(begin_insert_and_fail, "lost")
    await sqlite_thread.run(insert, "kept")
    assert await sqlite_thread.run(bodies) == ["kept"]
    assert await sqlite_thread.run(lambda connection: connection.in_transaction) is False


async def test_stop_finishes_the_jobs_submitted_rolls_back_what_they_left_open_and_ends_the_thread(
    tmp_path: Path,
) -> None:
    before = set(threading.enumerate())
    thread = SqliteThread(NAME, connector(tmp_path / "t.db"))
    await thread.start()
    (started,) = {t for t in set(threading.enumerate()) - before if t.name == NAME}
    await thread.run(insert, "committed")
    await thread.run(begin_and_insert, "left open")
    await thread.stop()
    await asyncio.to_thread(started.join, 5.0)
    assert not started.is_alive()
    with pytest.raises(sqlite3.OperationalError, match="the connection is closed"):
        await thread.run(bodies)
    await thread.stop()  # a second stop does nothing
    assert read_file(tmp_path / "t.db") == ["committed"]


async def test_it_can_be_started_again_after_a_stop(tmp_path: Path) -> None:
    thread = SqliteThread(NAME, connector(tmp_path / "t.db"))
    for n in range(20):
        await thread.start()
        await thread.run(insert, str(n))
        await thread.stop()
    assert read_file(tmp_path / "t.db") == [str(n) for n in range(20)]


async def test_start_raises_what_connecting_raised_and_the_thread_stays_closed() -> None:
    def refuse() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    thread = SqliteThread(NAME, refuse)
    with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
        await thread.start()
    with pytest.raises(sqlite3.OperationalError, match="the connection is closed"):
        await asyncio.wait_for(thread.run(bodies), 5.0)


def test_connect_file_creates_the_folder_and_the_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / "t.db"
    connection = connect_file(str(path), schema=SCHEMA, busy_timeout=2.0)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 2000
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        connection.execute("INSERT INTO notes VALUES ('x')")
    finally:
        connection.close()
    assert read_file(path) == ["x"]


def test_connect_file_gives_up_on_a_lock_held_past_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            connect_file(str(path), schema=SCHEMA, busy_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_connect_file_refuses_a_folder_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the folder should be")
    with pytest.raises(OSError):
        connect_file(str(tmp_path / "blocker" / "t.db"), schema=SCHEMA)
