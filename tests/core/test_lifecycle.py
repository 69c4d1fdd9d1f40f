"""The plugin lifecycle driven directly, as boot and the reloader drive it: construct, admit,
promote and unload, with a real (in-memory) tool that records what it is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core import BasePlugin, BaseTool, Container, PluginStatus, Registry
from core.lifecycle import LoadedPlugin, PluginLifecycle


class Board(BaseTool):
    """Keeps what each owner registered, and hands it over like the http tool does."""

    name = "board"

    def __init__(self) -> None:
        self.entries: dict[str, list[str]] = {}
        self.calls: list[str] = []

    def pin(self, owner: str, note: str) -> None:
        self.entries.setdefault(owner, []).append(note)

    def release_owner(self, owner: str) -> None:
        self.calls.append(f"release {owner}")
        self.entries.pop(owner, None)

    def promote_owner(self, staged: str, owner: str) -> None:
        self.calls.append(f"promote {staged} -> {owner}")
        self.entries[owner] = self.entries.pop(staged, [])


class Pinned(BasePlugin):
    def __init__(self, board: Any) -> None:
        self.board = board


class NeedsGhost(BasePlugin):
    def __init__(self, ghost: Any) -> None:
        self.ghost = ghost


def lifecycle(tmp_path: Path) -> tuple[PluginLifecycle, Board, Registry]:
    registry = Registry()
    container = Container(registry)
    board = Board()
    container.add(board)
    life = PluginLifecycle(container, registry, lambda path: path.relative_to(tmp_path).as_posix())
    life.tools = [board]
    return life, board, registry


async def test_construct_injects_by_name_and_a_missing_tool_is_the_reason(tmp_path: Path) -> None:
    life, _, registry = lifecycle(tmp_path)
    path = tmp_path / "domains/notes/plugins/pinned.py"
    built = life.construct(Pinned, "notes", path)
    assert isinstance(built, LoadedPlugin) and built.owner == "notes.Pinned"
    assert built.dependencies == ["board"]
    assert registry.plugins_in_file("domains/notes/plugins/pinned.py") == ["notes.Pinned"]
    reason = life.construct(NeedsGhost, "notes", path)
    assert reason == "missing required tools: ghost"
    assert registry.plugin_status("notes.NeedsGhost") is PluginStatus.DEAD


async def test_admit_then_promote_a_new_version_then_unload(tmp_path: Path) -> None:
    life, board, registry = lifecycle(tmp_path)
    path = tmp_path / "domains/notes/plugins/pinned.py"
    first = life.construct(Pinned, "notes", path)
    assert isinstance(first, LoadedPlugin)
    await life.admit(first, None)
    assert life.plugins_of_file(path) == [first]
    assert registry.plugin_status("notes.Pinned") is PluginStatus.READY
    board.pin("notes.Pinned", "v1")

    second = life.construct(Pinned, "notes", path, staged_owner="notes.Pinned#staging-1")
    assert isinstance(second, LoadedPlugin)
    board.pin(second.owner, "v2")
    life.promote(second, first)
    assert life.plugins["notes.Pinned"] is second
    assert board.entries == {"notes.Pinned": ["v2"]}
    await life.retire(first, swapped=True, drain_timeout=1.0)

    await life.unload(second, drain_timeout=1.0)
    assert life.plugins == {} and board.entries == {}
    assert registry.plugin_status("notes.Pinned") is None
    assert board.calls[0] == "promote notes.Pinned#staging-1 -> notes.Pinned"


async def test_a_plugin_that_fails_to_boot_is_dead_and_released(tmp_path: Path) -> None:
    life, board, registry = lifecycle(tmp_path)
    plugin = life.construct(Pinned, "notes", tmp_path / "domains/notes/plugins/pinned.py")
    assert isinstance(plugin, LoadedPlugin)
    board.pin("notes.Pinned", "half-booted")
    await life.admit(plugin, "on_boot() raised ValueError")
    assert registry.plugin_status("notes.Pinned") is PluginStatus.DEAD
    assert life.plugins == {} and board.entries == {}
