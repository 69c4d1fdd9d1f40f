"""The dump says which database backend runs and whether other processes share it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import booted, make_root


async def test_sqlite_is_reported_as_not_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'k.db'}")
    async with booted(make_root(tmp_path, tools=("db",))) as kernel:
        capability = kernel.registry.get_system_dump()["kernel"]["capabilities"]["db"]
        assert capability == {"backend": "sqlite", "shared": False}


async def test_postgresql_is_reported_as_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", postgres_url)
    async with booted(make_root(tmp_path, tools=("db",))) as kernel:
        capability = kernel.registry.get_system_dump()["kernel"]["capabilities"]["db"]
        assert capability == {"backend": "postgresql", "shared": True}
