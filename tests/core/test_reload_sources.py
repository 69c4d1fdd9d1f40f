"""Migrations and models changed under a served kernel, through ``kernel.plugin_host.apply``.

A new migration is applied before the plugin that needs it loads; a refused one is a load error,
holds the plugins of its domain back (the old version keeps serving) until it applies. A changed
model is imported again together with every plugin that imports it; a broken one is a load error
and leaves the old versions serving. Each test drives the host directly with the changed paths
(as the watcher would), so no test waits for a file system event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import Kernel
from core.reloader import ReloadAction
from tests.conftest import DATABASE_ENGINES, database_url
from tests.kit import PING_PLUGIN, make_root, serving, write

ITEMS_FILE = "domains/shop/plugins/items.py"
FIRST_MIGRATION = "migrations/shop/001_create_items.sql"

ITEMS = """
    from core import BasePlugin


    class Items(BasePlugin):
        def __init__(self, http, db):
            self.http = http
            self.db = db

        async def on_boot(self):
            self.http.add_endpoint("/items", "GET", self.list_items)

        async def list_items(self, data, context):
            rows = await self.db.query("SELECT {columns} FROM items ORDER BY name")
            return {"version": VERSION, "items": rows}


    VERSION = {version}
"""

TAGS = """
    from core import BasePlugin


    class Tags(BasePlugin):
        def __init__(self, http, db):
            self.http = http
            self.db = db

        async def on_boot(self):
            self.seen_at_boot = await self.db.scalar("SELECT count(*) FROM tags")  # needs the table
            self.http.add_endpoint("/tags", "GET", self.list_tags)

        async def list_tags(self, data, context):
            return {"tags": await self.db.query("SELECT name FROM tags ORDER BY name")}
"""


def items(version: int, columns: str = "name") -> str:
    return ITEMS.replace("{version}", str(version)).replace("{columns}", columns)


def dump(kernel: Kernel) -> dict[str, Any]:
    return kernel.registry.get_system_dump()


async def get(base_url: str, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        return await client.get(path)


async def apply(kernel: Kernel, root: Path, *relative: str) -> list[Any]:
    return await kernel.plugin_host.apply([root / r for r in relative])


@asynccontextmanager
async def shop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> AsyncIterator[tuple[Path, Kernel, str]]:
    """A served root with ``db`` and ``http``: one migration applied, ``/items`` at version 1."""
    root = make_root(tmp_path, tools=("db", "http"))
    write(
        root,
        FIRST_MIGRATION,
        "CREATE TABLE items (name TEXT NOT NULL);\nINSERT INTO items VALUES ('apple');\n",
    )
    write(root, ITEMS_FILE, items(1))
    async with database_url(engine) as url:
        monkeypatch.setenv("DATABASE_URL", url)
        async with serving(root) as (kernel, base_url):
            assert (await get(base_url, "/items")).json() == {"version": 1, "items": [{"name": "apple"}]}
            yield root, kernel, base_url


# -- migrations ----------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", DATABASE_ENGINES)
async def test_a_new_migration_is_applied_before_the_new_plugin_that_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with shop(tmp_path, monkeypatch, engine) as (root, kernel, base_url):
        migration = "migrations/shop/002_create_tags.sql"
        write(
            root, migration, "CREATE TABLE tags (name TEXT NOT NULL);\nINSERT INTO tags VALUES ('fresh');\n"
        )
        write(root, "domains/shop/plugins/tags.py", TAGS)
        with caplog.at_level(logging.INFO, logger="keel.reloader"):
            outcomes = await apply(kernel, root, "domains/shop/plugins/tags.py", migration)
        assert [(o.file, o.action, o.errors) for o in outcomes] == [
            (migration, ReloadAction.APPLIED, {}),
            ("domains/shop/plugins/tags.py", ReloadAction.LOADED, {}),
        ]
        assert kernel.plugins["shop.Tags"].instance.seen_at_boot == 1  # type: ignore[attr-defined]
        response = await get(base_url, "/tags")
        assert (response.status_code, response.json()) == (200, {"tags": [{"name": "fresh"}]})
        assert "applied migration shop/002_create_tags.sql" in caplog.messages
        assert dump(kernel)["load_errors"] == {}

        # Touching an applied migration again (unchanged) applies nothing and reloads nothing.
        assert await apply(kernel, root, migration) == []


@pytest.mark.parametrize("engine", DATABASE_ENGINES)
async def test_a_failing_migration_is_refused_and_the_old_plugin_keeps_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with shop(tmp_path, monkeypatch, engine) as (root, kernel, base_url):
        old = kernel.plugins["shop.Items"]
        migration = "migrations/shop/002_add_price.sql"
        write(root, migration, "ALTER TABLE items ADD COLUMN price INTEGER;\nUPDATE missing SET price = 3;\n")
        write(root, ITEMS_FILE, items(2, "name, price"))
        with caplog.at_level(logging.INFO, logger="keel.reloader"):
            outcomes = await apply(kernel, root, ITEMS_FILE, migration)
        assert [(o.file, o.action) for o in outcomes] == [
            (migration, ReloadAction.FAILED),
            (ITEMS_FILE, ReloadAction.FAILED),
        ]
        error = dump(kernel)["load_errors"][migration]
        assert error.startswith("shop/002_add_price.sql: statement 2 (line 2) failed")
        assert outcomes[0].errors == {migration: error}
        assert any(m.startswith("refused migration shop/002_add_price.sql: ") for m in caplog.messages)
        # Not promoted: the old version serves, and says why it was not replaced.
        assert kernel.plugins["shop.Items"] is old
        state = dump(kernel)["plugins"]["shop.Items"]
        assert state["status"] == "READY"
        assert "waits for migration shop/002_add_price.sql" in state["reload_error"]
        response = await get(base_url, "/items")
        assert (response.status_code, response.json()) == (200, {"version": 1, "items": [{"name": "apple"}]})
        # The file rolled back as a whole: the column the first statement added is not there.
        assert (await kernel.container.get("db").query("SELECT * FROM items")) == [{"name": "apple"}]

        # Saving the plugin again does not get it past the refused migration.
        [outcome] = await apply(kernel, root, ITEMS_FILE)
        assert (outcome.action, outcome.plugins) == (ReloadAction.FAILED, ("shop.Items",))
        assert kernel.plugins["shop.Items"] is old

        # Fixing the migration applies it, and the plugin held back for it loads.
        write(root, migration, "ALTER TABLE items ADD COLUMN price INTEGER;\nUPDATE items SET price = 3;\n")
        outcomes = await apply(kernel, root, migration)
        assert [(o.file, o.action, o.errors) for o in outcomes] == [
            (migration, ReloadAction.APPLIED, {}),
            (ITEMS_FILE, ReloadAction.RELOADED, {}),
        ]
        response = await get(base_url, "/items")
        assert response.json() == {"version": 2, "items": [{"name": "apple", "price": 3}]}
        assert dump(kernel)["load_errors"] == {}
        assert dump(kernel)["plugins"]["shop.Items"]["reload_error"] is None


async def test_an_applied_migration_edited_on_disk_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop(tmp_path, monkeypatch, "sqlite") as (root, kernel, base_url):
        write(root, FIRST_MIGRATION, "CREATE TABLE items (name TEXT NOT NULL, price INTEGER);\n")
        write(root, ITEMS_FILE, items(2, "name, price"))
        outcomes = await apply(kernel, root, FIRST_MIGRATION, ITEMS_FILE)
        assert [(o.file, o.action) for o in outcomes] == [
            (FIRST_MIGRATION, ReloadAction.FAILED),
            (ITEMS_FILE, ReloadAction.FAILED),
        ]
        assert "changed on disk" in dump(kernel)["load_errors"][FIRST_MIGRATION]
        assert (await get(base_url, "/items")).json()["version"] == 1

        # Restoring the file clears the refusal; the held plugin loads (and fails, as its SQL does).
        write(
            root,
            FIRST_MIGRATION,
            "CREATE TABLE items (name TEXT NOT NULL);\nINSERT INTO items VALUES ('apple');\n",
        )
        write(root, ITEMS_FILE, items(3))
        outcomes = await apply(kernel, root, FIRST_MIGRATION, ITEMS_FILE)
        assert [(o.file, o.action, o.errors) for o in outcomes] == [(ITEMS_FILE, ReloadAction.RELOADED, {})]
        assert dump(kernel)["load_errors"] == {}
        assert (await get(base_url, "/items")).json()["version"] == 3


async def test_a_migration_saved_in_two_writes_is_applied_once_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import core.reload_sources as sources

    async with shop(tmp_path, monkeypatch, "sqlite") as (root, kernel, base_url):
        migration = root / "migrations/shop/002_create_tags.sql"
        migration.write_text("")  # the editor truncated the file ...
        reads: list[bytes] = []
        read = sources._read_bytes

        def read_during_the_save(path: Path) -> bytes:
            content = read(path)
            reads.append(content)
            if len(reads) == 1:  # ... and its second write lands after the host first looked
                migration.write_text("CREATE TABLE tags (name TEXT NOT NULL);\n")
            return content

        monkeypatch.setattr(sources, "_read_bytes", read_during_the_save)
        [outcome] = await apply(kernel, root, str(migration.relative_to(root)))
        assert (outcome.action, outcome.errors) == (ReloadAction.APPLIED, {})
        # It looked until two reads a PLUGIN_STABLE_MS apart agreed, then applied what it read.
        assert reads[0] == b"" and reads[-1] == reads[-2] == b"CREATE TABLE tags (name TEXT NOT NULL);\n"
        assert await kernel.container.get("db").scalar("SELECT count(*) FROM tags") == 0


# -- models --------------------------------------------------------------------------------------

MODEL_FILE = "domains/shop/models/item.py"

MODEL = """
    from pydantic import BaseModel


    class Item(BaseModel):
        name: str
"""

CATALOG = """
    from .models.item import Item


    def sample():
        return Item.model_validate({"name": "apple", "price": 3}).model_dump()
"""

SAMPLE = """
    from core import BasePlugin
    from domains.shop import catalog


    class Sample(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/sample", "GET", self.answer)

        async def answer(self, data, context):
            return catalog.sample()
"""


@asynccontextmanager
async def catalog(tmp_path: Path) -> AsyncIterator[tuple[Path, Kernel, str]]:
    """A served root whose ``/sample`` answers through a module that imports the ``Item`` model."""
    root = make_root(tmp_path, tools=("http",))
    write(root, MODEL_FILE, MODEL)
    write(root, "domains/shop/catalog.py", CATALOG)
    write(root, "domains/shop/plugins/sample.py", SAMPLE)
    write(root, "domains/shop/plugins/ping.py", PING_PLUGIN)
    async with serving(root) as (kernel, base_url):
        assert (await get(base_url, "/sample")).json() == {"name": "apple"}
        yield root, kernel, base_url


async def test_an_edited_model_reloads_the_plugins_that_import_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with catalog(tmp_path) as (root, kernel, base_url):
        ping = kernel.plugins["shop.Ping"]
        write(root, MODEL_FILE, MODEL + "        price: int = 0\n")
        with caplog.at_level(logging.INFO, logger="keel.reloader"):
            outcomes = await apply(kernel, root, MODEL_FILE)
        assert [(o.file, o.action, o.plugins, o.errors) for o in outcomes] == [
            ("domains/shop/plugins/sample.py", ReloadAction.RELOADED, ("shop.Sample",), {})
        ]
        response = await get(base_url, "/sample")
        assert (response.status_code, response.json()) == (200, {"name": "apple", "price": 3})
        assert kernel.plugins["shop.Ping"] is ping  # it does not import the model
        assert f"reloaded plugins shop.Sample because model {MODEL_FILE} changed" in caplog.messages


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from pydantic import BaseModel\n\nclass Item(BaseModel:\n    name: str\n", "SyntaxError"),
        ("raise RuntimeError('half migrated')\n", "RuntimeError: half migrated"),
    ],
    ids=["syntax error", "raises"],
)
async def test_a_broken_model_is_a_load_error_and_the_old_plugins_keep_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: str
) -> None:
    monkeypatch.setenv("PLUGIN_COMPLETE_TIMEOUT", "0.2")  # a syntax error never becomes complete
    async with catalog(tmp_path) as (root, kernel, base_url):
        old = kernel.plugins["shop.Sample"]
        write(root, MODEL_FILE, source)
        [outcome] = await apply(kernel, root, MODEL_FILE)
        assert (outcome.file, outcome.action, outcome.plugins) == (
            MODEL_FILE,
            ReloadAction.FAILED,
            ("shop.Sample",),
        )
        assert expected in dump(kernel)["load_errors"][MODEL_FILE]
        assert expected in dump(kernel)["plugins"]["shop.Sample"]["reload_error"]
        assert kernel.plugins["shop.Sample"] is old
        assert (await get(base_url, "/sample")).json() == {"name": "apple"}

        write(root, MODEL_FILE, MODEL + "        price: int = 0\n")
        [outcome] = await apply(kernel, root, MODEL_FILE)
        assert outcome.ok
        assert (await get(base_url, "/sample")).json() == {"name": "apple", "price": 3}
        assert dump(kernel)["load_errors"] == {}
        assert dump(kernel)["plugins"]["shop.Sample"]["reload_error"] is None


async def test_a_model_no_plugin_imports_changes_nothing(tmp_path: Path) -> None:
    async with catalog(tmp_path) as (root, kernel, _):
        assert await apply(kernel, root, "domains/shop/models/unused.py") == []
        write(root, "domains/shop/models/unused.py", "UNUSED = 1\n")
        assert await apply(kernel, root, "domains/shop/models/unused.py") == []
