"""The ``db`` fixture: one DbTool per test, on SQLite and on PostgreSQL (the parity parameter)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.tools.db.db_fixtures import pg_schema, project_modules_restored, started_tool
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
        async with started_tool(root) as tool:
            yield tool
        return
    async with pg_schema() as url:
        monkeypatch.setenv("DATABASE_URL", url)
        async with started_tool(root) as tool:
            yield tool


@pytest.fixture(autouse=True)
def _project_modules() -> Iterator[None]:
    """Tests here boot kernels on temporary roots; leave ``tools.*`` as the next test expects it."""
    with project_modules_restored():
        yield
