"""The ``db`` fixture: one DbTool per test, on SQLite and on PostgreSQL (the parity parameter)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import DATABASE_ENGINES, database_url
from tests.kit import started_tool
from tools.db.db_tool import DbTool


@pytest.fixture(params=DATABASE_ENGINES)
async def db(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DbTool]:
    """A set-up ``db`` tool on a fresh database; the same tests run once per engine."""
    root = tmp_path / "root"
    root.mkdir()
    async with database_url(request.param) as url:
        monkeypatch.setenv("DATABASE_URL", url)
        async with started_tool(DbTool, root) as tool:
            yield tool
