"""The ``db`` fixture: one DbTool per test, on SQLite and on PostgreSQL (the parity parameter)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import fresh_postgres_schema
from tests.kit import started_tool
from tools.db.db_tool import DbTool


@pytest.fixture(params=["sqlite", "postgres"])
async def db(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DbTool]:
    """A set-up ``db`` tool on a fresh database; the same tests run once per engine."""
    root = tmp_path / "root"
    root.mkdir()
    if request.param == "sqlite":
        monkeypatch.setenv("DATABASE_URL", "sqlite:///data/test.db")
        async with started_tool(DbTool, root) as tool:
            yield tool
        return
    async with fresh_postgres_schema() as url:
        monkeypatch.setenv("DATABASE_URL", url)
        async with started_tool(DbTool, root) as tool:
            yield tool
