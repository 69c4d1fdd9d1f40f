"""The dump says which store and checkpoint backends run and whether other processes share them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import booted, make_root


@pytest.mark.parametrize(
    ("store_url", "checkpoint_url", "expected_store", "expected_checkpoint"),
    [
        ("", "memory://", {"backend": "memory", "shared": False}, {"backend": "memory", "shared": False}),
        (
            "redis://127.0.0.1:1/0",
            "sqlite:///x.db",
            {"backend": "redis", "shared": True},
            {"backend": "sqlite", "shared": False},
        ),
    ],
)
async def test_backends_are_reported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store_url: str,
    checkpoint_url: str,
    expected_store: dict[str, object],
    expected_checkpoint: dict[str, object],
) -> None:
    monkeypatch.setenv("STORE_URL", store_url)
    monkeypatch.setenv("CHECKPOINT_URL", checkpoint_url.replace("x.db", str(tmp_path / "x.db")))
    monkeypatch.setenv("STORE_CONNECT_TIMEOUT", "0.5")
    async with booted(make_root(tmp_path, tools=("store", "checkpoint"))) as kernel:
        capabilities = kernel.registry.get_system_dump()["kernel"]["capabilities"]
        assert capabilities["store"] == expected_store
        assert capabilities["checkpoint"] == expected_checkpoint
