"""A process killed in the middle of a transaction leaves nothing half-written, on both engines."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import DATABASE_ENGINES, database_url
from tests.kit import PROJECT, started_tool
from tools.db.db_tool import DbTool

CRASHING_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from core.registry import Registry
    from tools.db.db_tool import DbTool

    async def main() -> None:
        db = DbTool()
        db.bind(project_root=Path(sys.argv[1]), registry=Registry())
        await db.setup()
        await db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, batch INTEGER)")
        async with db.transaction():
            await db.executemany("INSERT INTO items (id, batch) VALUES ($1, 1)", [(n,) for n in range(100)])
        async with db.transaction():
            second = [(n,) for n in range(100, 200)]
            await db.executemany("INSERT INTO items (id, batch) VALUES ($1, 2)", second)
            await db.execute("UPDATE items SET batch = 3 WHERE batch = 1")
            print("inside", flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@pytest.fixture(params=DATABASE_ENGINES)
async def database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    async with database_url(request.param, "data/crash.db") as url:
        monkeypatch.setenv("DATABASE_URL", url)
        yield


async def test_a_process_killed_inside_a_transaction_leaves_nothing_half_written(
    database: None, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_WRITER,
        str(root),
        cwd=PROJECT,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.strip() == b"inside"
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    assert process.returncode == -signal.SIGKILL
    async with started_tool(DbTool, root) as db:
        if db.dialect == "sqlite":
            assert await db.scalar("PRAGMA integrity_check") == "ok"
        rows = await db.query("SELECT batch, count(*) AS n FROM items GROUP BY batch")
        assert rows == [{"batch": 1, "n": 100}]  # the committed batch, untouched by the open one
