"""MemoryItem is a frozen value with frozen metadata; FakeMemory satisfies MemorySource."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from core.state.memory import MemoryItem, MemorySource
from core.testing import FakeMemory


def test_memory_item_is_frozen_deeply() -> None:
    metadata: dict[str, Any] = {"path": "runbook.md", "tags": ["tls"]}
    item = MemoryItem("rotate every 90d", "runbook", 0.9, metadata)
    metadata["tags"].append("edited")
    assert item.metadata == {"path": "runbook.md", "tags": ["tls"]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.content = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        item.metadata["path"] = "elsewhere"  # type: ignore[index]
    annotated = dataclasses.replace(item, metadata={**item.metadata, "line": 3})
    assert annotated.metadata["line"] == 3


def test_duplicates_collapse_in_a_set_whatever_their_metadata() -> None:
    a = MemoryItem("c", "s", None, {"chunk": 1})
    b = MemoryItem("c", "s", None, {"chunk": 1})
    c = MemoryItem("c", "s", None, {"chunk": 2})
    assert len({a, b}) == 1 and len({a, c}) == 2 and hash(a) == hash(c)


def test_fake_memory_is_a_memory_source() -> None:
    assert isinstance(FakeMemory(), MemorySource)
