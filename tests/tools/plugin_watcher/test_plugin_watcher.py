"""The ``plugin_watcher`` tool: off unless asked, reported in the dump, and watching end to end."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.kit import booted, until, write
from tests.tools.plugin_watcher.watch_kit import answers, dump, items, watched_root, watching


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return watched_root(tmp_path, tools=("http", "plugin_watcher", "event_bus"))


async def test_it_is_off_unless_plugins_watch_is_set(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLUGINS_WATCH", raising=False)
    async with booted(root) as kernel:
        state = dump(kernel)
        assert state["tools"]["plugin_watcher"]["status"] == "OFF"
        assert "set PLUGINS_WATCH=1" in state["tools"]["plugin_watcher"]["message"]
        assert state["kernel"]["capabilities"]["plugin_watch"] == {
            "enabled": False,
            "reason": "set PLUGINS_WATCH=1 to turn it on",
        }


@pytest.mark.parametrize("setting", ["PLUGINS_WATCH_STEP_MS", "PLUGINS_WATCH_DEBOUNCE_MS"])
async def test_a_timing_that_is_not_a_number_is_a_dead_tool(
    root: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv("PLUGINS_WATCH", "1")
    monkeypatch.setenv(setting, "fast")
    async with booted(root) as kernel:
        tool = dump(kernel)["tools"]["plugin_watcher"]
        assert tool["status"] == "DEAD"
        assert f"{setting} must be a positive whole number of milliseconds" in tool["message"]


async def test_files_written_deleted_and_rewritten_take_effect(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGINS_WATCH_DEBOUNCE_MS", "400")
    path = root / "domains/shop/plugins/items.py"
    async with watching(root, monkeypatch) as (kernel, base_url):
        capability = dump(kernel)["kernel"]["capabilities"]["plugin_watch"]
        assert capability == {
            "enabled": True,
            "watching": True,
            "path": str(kernel.root / "domains"),
            "debounce_ms": 400,
            "step_ms": 20,
            "batches": 0,
            "recent": [],
        }

        write(root, "domains/shop/plugins/items.py", items(1))
        await until(lambda: answers(base_url, "/items", 1), "the new file serves /items")
        os.unlink(path)
        await until(lambda: answers(base_url, "/items", None), "the deleted file's route is gone")
        write(root, "domains/shop/plugins/items.py", items(2))
        await until(lambda: answers(base_url, "/items", 2), "the file dropped in again serves /items")

        recent = dump(kernel)["kernel"]["capabilities"]["plugin_watch"]["recent"]
        assert [(r["file"], r["action"], r["plugins"], r["errors"]) for r in recent] == [
            ("domains/shop/plugins/items.py", "loaded", ["shop.Items"], {}),
            ("domains/shop/plugins/items.py", "unloaded", ["shop.Items"], {}),
            ("domains/shop/plugins/items.py", "loaded", ["shop.Items"], {}),
        ]
        watcher = kernel.container.get_raw_tools()["plugin_watcher"]
    assert not watcher.watching  # type: ignore[attr-defined]
    assert dump(kernel)["kernel"]["capabilities"]["plugin_watch"]["watching"] is False


async def test_a_file_outside_the_plugin_folders_changes_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with watching(root, monkeypatch) as (kernel, base_url):
        write(root, "domains/shop/models/item.py", "ITEM = 1\n")
        write(root, "domains/shop/plugins/_helpers.py", "HELP = 1\n")
        write(root, "domains/shop/plugins/items.py", items(1))  # a marker: batches run in order
        await until(lambda: answers(base_url, "/items", 1), "the plugin file serves /items")
        recent = dump(kernel)["kernel"]["capabilities"]["plugin_watch"]["recent"]
        assert [r["file"] for r in recent] == ["domains/shop/plugins/items.py"]


TAGS = """
    from core import BasePlugin


    class Tags(BasePlugin):
        def __init__(self, http, db):
            self.http = http
            self.db = db

        def on_boot(self):
            self.http.add_endpoint("/tags", "GET", self.list_tags)

        async def list_tags(self, data, context):
            return {"tags": await self.db.query("SELECT name FROM tags ORDER BY name")}
"""


async def tags_answer(base_url: str) -> bool:
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:
        response = await client.get("/tags")
    return response.status_code == 200 and response.json() == {"tags": [{"name": "fresh"}]}


async def test_a_migration_and_the_plugin_using_it_dropped_in_together_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = watched_root(tmp_path, tools=("http", "plugin_watcher", "event_bus", "db"))
    write(root, "migrations/shop/001_create_items.sql", "CREATE TABLE items (name TEXT);\n")
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/test.db")
    async with watching(root, monkeypatch) as (kernel, base_url):
        migration = "migrations/shop/002_create_tags.sql"
        write(root, migration, "CREATE TABLE tags (name TEXT);\nINSERT INTO tags VALUES ('fresh');\n")
        write(root, "domains/shop/plugins/tags.py", TAGS)
        await until(lambda: tags_answer(base_url), "/tags answers from the new table")
        recent = dump(kernel)["kernel"]["capabilities"]["plugin_watch"]["recent"]
        assert (migration, "applied") in {(r["file"], r["action"]) for r in recent}
        assert dump(kernel)["load_errors"] == {}


SHOWN = """
    from core import BasePlugin
    from domains.shop.models.item import Item


    class Shown(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/shown", "GET", self.show)

        async def show(self, data, context):
            return Item.model_validate({"name": "apple", "price": 3}).model_dump()
"""


async def shown(base_url: str, expected: dict[str, object]) -> bool:
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:
        response = await client.get("/shown")
    return response.status_code == 200 and response.json() == expected


async def test_an_edited_model_reloads_the_plugin_that_imports_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = "from pydantic import BaseModel\n\n\nclass Item(BaseModel):\n    name: str\n"
    write(root, "domains/shop/models/item.py", model)
    write(root, "domains/shop/plugins/shown.py", SHOWN)
    async with watching(root, monkeypatch) as (kernel, base_url):
        assert await shown(base_url, {"name": "apple"})
        write(root, "domains/shop/models/item.py", model + "    price: int = 0\n")
        await until(lambda: shown(base_url, {"name": "apple", "price": 3}), "/shown has the new field")
