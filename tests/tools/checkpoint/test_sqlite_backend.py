"""The SQLite backend opens its connection lazily: concurrent first calls share one connection
thread, and closing while the first call is opening leaves no thread behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.tools.store.sqlite_threads import still_alive, threads_named
from tools.checkpoint.backend import Row
from tools.checkpoint.sqlite_backend import SqliteBackend

THREAD = "keel-checkpoint-sqlite"


async def test_concurrent_first_calls_open_one_connection(tmp_path: Path) -> None:
    before = threads_named(THREAD)
    backend = SqliteBackend(str(tmp_path / "checkpoints.db"))
    await asyncio.gather(*(backend.save(f"r{n}", Row(1, "{}", 0.0, "running"), 0) for n in range(5)))
    started = threads_named(THREAD) - before
    assert [await backend.list_versions(f"r{n}") for n in range(5)] == [[1]] * 5
    await backend.close()
    assert len(started) == 1
    assert await still_alive(started) == []


async def test_closing_while_the_first_call_opens_leaves_no_thread_behind(tmp_path: Path) -> None:
    before = threads_named(THREAD)
    backend = SqliteBackend(str(tmp_path / "checkpoints.db"))
    outcomes = await asyncio.gather(backend.ping(), backend.close(), return_exceptions=True)
    assert list(outcomes) == [True, None]
    assert await still_alive(threads_named(THREAD) - before) == []
