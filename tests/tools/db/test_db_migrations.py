"""Migrations: ordering, checksums, atomic application, statement splitting, ``main.py migrate``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core import Kernel
from tests.conftest import DATABASE_ENGINES, database_url
from tests.kit import booted, bound_tool, make_root, started_tool, write
from tests.tools.db.db_fixtures import write_migration
from tools.db.db_tool import DbTool
from tools.db.errors import MigrationError
from tools.db.migrations import Migration, discover, order


def migration(name: str, *depends: str) -> Migration:
    return Migration(name, "", "checksum", depends)


def names(migrations: list[Migration]) -> list[str]:
    return [m.name for m in migrations]


# -- ordering (pure) ------------------------------------------------------------------------------


def test_independent_files_run_alphabetically_and_dependencies_first() -> None:
    ordered = order(
        [
            migration("users/002_profiles.sql"),
            migration("orders/001_orders.sql", "users/001_users.sql"),
            migration("users/001_users.sql"),
            migration("audit/001_log.sql"),
        ]
    )
    assert names(ordered) == [
        "audit/001_log.sql",
        "users/001_users.sql",
        "orders/001_orders.sql",
        "users/002_profiles.sql",
    ]


def test_a_cycle_falls_back_to_alphabetical_with_a_warning_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="keel.db.migrations"):
        ordered = order(
            [
                migration("b/001_b.sql", "a/001_a.sql"),
                migration("a/001_a.sql", "b/001_b.sql"),
                migration("d/001_d.sql", "a/001_a.sql"),
                migration("c/001_c.sql"),
            ]
        )
    assert names(ordered) == ["c/001_c.sql", "a/001_a.sql", "b/001_b.sql", "d/001_d.sql"]
    assert [r.getMessage() for r in caplog.records] == [
        "migration dependency cycle a/001_a.sql -> b/001_b.sql -> a/001_a.sql; running a/001_a.sql first "
        "(alphabetical order)"
    ]


def test_a_missing_dependency_is_an_error_naming_both_files() -> None:
    with pytest.raises(
        MigrationError, match="orders/001_o.sql depends on users/009_gone.sql, which does not exist"
    ):
        order([migration("orders/001_o.sql", "users/009_gone.sql")])
    assert names(order([migration("orders/001_o.sql", "users/001_u.sql")], applied={"users/001_u.sql"})) == [
        "orders/001_o.sql"
    ]


def test_discover_reads_dependencies_and_rejects_misplaced_files(tmp_path: Path) -> None:
    write_migration(tmp_path, "users/001_base.sql", "CREATE TABLE a (x INTEGER);")
    write_migration(
        tmp_path,
        "users/002_more.sql",
        "-- depends: 001_base.sql, audit/001_log.sql\n--DEPENDS: audit/001_log.sql\nSELECT 1;",
    )
    write_migration(tmp_path, "audit/001_log.sql", "SELECT 1;")
    found = discover(tmp_path / "migrations")
    assert [(m.name, m.depends) for m in found] == [
        ("audit/001_log.sql", ()),
        ("users/001_base.sql", ()),
        ("users/002_more.sql", ("users/001_base.sql", "audit/001_log.sql")),
    ]
    write_migration(tmp_path, "users/notes.sql", "SELECT 1;")
    with pytest.raises(MigrationError, match="users/notes.sql: migration files are named NNN_name.sql"):
        discover(tmp_path / "migrations")


# -- applying (both engines) ----------------------------------------------------------------------


@pytest.fixture(params=DATABASE_ENGINES)
async def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """Points DATABASE_URL at a fresh database; yields the engine's dialect name."""
    async with database_url(request.param, "data/migrations.db") as url:
        monkeypatch.setenv("DATABASE_URL", url)
        yield request.param


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


async def test_each_file_is_applied_once_and_recorded_with_its_checksum(engine: str, root: Path) -> None:
    write_migration(
        root, "shop/001_items.sql", "CREATE TABLE items (name TEXT);\nINSERT INTO items VALUES ('seed');"
    )
    async with started_tool(DbTool, root) as db:
        records = await db.query("SELECT name, checksum FROM keel_migrations")
        assert [r["name"] for r in records] == ["shop/001_items.sql"]
        assert len(records[0]["checksum"]) == 64
    write_migration(root, "shop/002_more.sql", "INSERT INTO items VALUES ('second');")
    async with started_tool(DbTool, root) as db:
        assert await db.query("SELECT name FROM items ORDER BY name") == [
            {"name": "second"},
            {"name": "seed"},
        ]
        assert await db.scalar("SELECT count(*) FROM keel_migrations") == 2


async def test_an_applied_file_that_changed_stops_the_boot(engine: str, root: Path) -> None:
    path = write_migration(root, "shop/001_items.sql", "CREATE TABLE items (name TEXT);\n")
    async with started_tool(DbTool, root):
        pass
    path.write_bytes(b"CREATE TABLE items (name TEXT);\r\n")  # converted line endings are not a change
    async with started_tool(DbTool, root):
        pass
    path.write_text("CREATE TABLE items (name TEXT, price INTEGER);\n")
    tool = bound_tool(DbTool, root)
    with pytest.raises(MigrationError, match=r"applied migration changed on disk: shop/001_items.sql"):
        await tool.setup()
    with pytest.raises(Exception, match="db did not start"):  # and it stays down, however often it is called
        await tool.scalar("SELECT 1")


async def test_a_failing_file_is_rolled_back_whole_and_not_recorded(engine: str, root: Path) -> None:
    write_migration(root, "shop/001_ok.sql", "CREATE TABLE ok (x INTEGER);")
    write_migration(
        root, "shop/002_bad.sql", "CREATE TABLE half (x INTEGER);\n\nINSERT INTO nowhere VALUES (1);\n"
    )
    with pytest.raises(
        MigrationError, match=r"shop/002_bad.sql: statement 2 \(line 3\) failed: undefined_table"
    ):
        await bound_tool(DbTool, root).setup()
    (root / "migrations" / "shop" / "002_bad.sql").unlink()
    async with started_tool(DbTool, root) as db:
        assert await db.query("SELECT name FROM keel_migrations") == [{"name": "shop/001_ok.sql"}]
        assert await db.scalar("SELECT count(*) FROM ok") == 0
        with pytest.raises(Exception, match="undefined_table"):
            await db.scalar("SELECT count(*) FROM half")


async def test_pending_files_are_applied_while_the_tool_serves_and_a_refusal_leaves_it_serving(
    engine: str, root: Path
) -> None:
    write_migration(root, "shop/001_items.sql", "CREATE TABLE items (name TEXT);")
    async with started_tool(DbTool, root) as db:
        assert await db.apply_pending_migrations() == {
            "applied": [],
            "error": None,
            "failed": None,
            "unapplied": [],
        }
        write_migration(root, "shop/002_seed.sql", "INSERT INTO items VALUES ('seed');")
        write_migration(
            root, "shop/003_bad.sql", "CREATE TABLE half (x INTEGER);\nINSERT INTO nowhere VALUES (1);"
        )
        write_migration(root, "users/001_users.sql", "CREATE TABLE users (name TEXT);")
        answer = await db.apply_pending_migrations()
        assert answer["applied"] == ["shop/002_seed.sql"]
        assert answer["failed"] == "shop/003_bad.sql"
        assert answer["error"].startswith("shop/003_bad.sql: statement 2 (line 2) failed")
        assert answer["unapplied"] == ["shop/003_bad.sql", "users/001_users.sql"]  # it stopped at the failure
        assert await db.scalar("SELECT count(*) FROM items") == 1  # and still serves

        write_migration(root, "shop/003_bad.sql", "CREATE TABLE half (x INTEGER);")
        answer = await db.apply_pending_migrations()
        assert answer == {
            "applied": ["shop/003_bad.sql", "users/001_users.sql"],
            "error": None,
            "failed": None,
            "unapplied": [],
        }

        write_migration(root, "shop/001_items.sql", "CREATE TABLE items (name TEXT, price INTEGER);")
        answer = await db.apply_pending_migrations()
        assert "applied migration changed on disk: shop/001_items.sql" in answer["error"]
        assert (answer["applied"], answer["failed"], answer["unapplied"]) == (
            [],
            None,
            ["shop/001_items.sql"],
        )


async def test_transaction_control_in_a_file_is_refused(engine: str, root: Path) -> None:
    write_migration(
        root, "shop/001_tx.sql", "CREATE TABLE a (x INTEGER);\nBEGIN;\nCREATE TABLE b (x INTEGER);\nCOMMIT;"
    )
    with pytest.raises(MigrationError, match=r"shop/001_tx.sql: statement 2 \(line 2\) is BEGIN"):
        await bound_tool(DbTool, root).setup()


async def test_a_missing_dependency_stops_the_boot(engine: str, root: Path) -> None:
    write_migration(
        root, "orders/001_orders.sql", "-- depends: users/001_users.sql\nCREATE TABLE o (x INTEGER);"
    )
    with pytest.raises(MigrationError, match="depends on users/001_users.sql, which does not exist"):
        await bound_tool(DbTool, root).setup()


async def test_dependencies_decide_the_order_across_domains(engine: str, root: Path) -> None:
    write_migration(
        root,
        "billing/001_invoices.sql",
        "-- depends: users/001_users.sql\n"
        "CREATE TABLE invoices (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users (id));",
    )
    write_migration(root, "users/001_users.sql", "CREATE TABLE users (id INTEGER PRIMARY KEY);")
    async with started_tool(DbTool, root) as db:
        assert await db.scalar("SELECT count(*) FROM invoices") == 0


async def test_concurrent_boots_on_one_database_apply_each_file_once(engine: str, root: Path) -> None:
    write_migration(
        root, "demo/001_runs.sql", "CREATE TABLE runs (id INTEGER);\nINSERT INTO runs VALUES (1);\n"
    )
    write_migration(root, "demo/002_again.sql", "INSERT INTO runs VALUES (2);\n")
    tools = [bound_tool(DbTool, root) for _ in range(4)]
    try:
        await asyncio.gather(*(tool.setup() for tool in tools))
        assert await tools[0].query("SELECT id FROM runs ORDER BY id") == [{"id": 1}, {"id": 2}]
        assert await tools[0].scalar("SELECT count(*) FROM keel_migrations") == 2
    finally:
        for tool in tools:
            await tool.shutdown()


_SQLITE_SCRIPT = """
-- a comment; with a semicolon
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, size TEXT);
CREATE TABLE audit (note_id INTEGER, what TEXT);
CREATE TRIGGER notes_audit AFTER INSERT ON notes
BEGIN
    INSERT INTO audit (note_id, what) VALUES (new.id, 'a; b');
    UPDATE notes SET size = CASE WHEN length(new.body) > 3 THEN 'long' ELSE 'short' END WHERE id = new.id;
END;
/* a block comment; spanning
   lines */
INSERT INTO notes (body) VALUES ('semi;colon -- not a comment');
"""

_POSTGRES_SCRIPT = """
-- a comment; with a semicolon
CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT NOT NULL, size TEXT);
CREATE TABLE audit (note_id INTEGER, what TEXT);
CREATE FUNCTION notes_audit() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO audit (note_id, what) VALUES (NEW.id, 'a; b');
    UPDATE notes SET size = CASE WHEN length(NEW.body) > 3 THEN 'long' ELSE 'short' END WHERE id = NEW.id;
    RETURN NEW;
END;
$body$;
CREATE TRIGGER notes_audit AFTER INSERT ON notes FOR EACH ROW EXECUTE FUNCTION notes_audit();
/* a block comment; /* nested; */ spanning
   lines */
INSERT INTO notes (body) VALUES ('semi;colon -- not a comment');
"""


async def test_scripts_with_triggers_strings_and_comments_are_split_correctly(
    engine: str, root: Path
) -> None:
    write_migration(root, "notes/001_notes.sql", _SQLITE_SCRIPT if engine == "sqlite" else _POSTGRES_SCRIPT)
    async with started_tool(DbTool, root) as db:
        assert await db.query("SELECT body, size FROM notes") == [
            {"body": "semi;colon -- not a comment", "size": "long"}
        ]
        assert await db.query("SELECT what FROM audit") == [{"what": "a; b"}]


# -- through the kernel ----------------------------------------------------------------------------


async def test_migrations_run_before_plugins_boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/app.db")
    root = make_root(tmp_path, tools=("db",))
    write_migration(root, "demo/001_greetings.sql", "CREATE TABLE greetings (text TEXT);")
    write(
        root,
        "domains/demo/plugins/greeter.py",
        """
        from core import BasePlugin

        class Greeter(BasePlugin):
            def __init__(self, db):
                self.db = db

            async def on_boot(self):
                await self.db.execute("INSERT INTO greetings (text) VALUES ($1)", ["hello"])
        """,
    )
    async with booted(root) as kernel:
        assert kernel.registry.get_system_dump()["plugins"]["demo.Greeter"]["status"] == "READY"
        assert await kernel.container.get("db").query("SELECT text FROM greetings") == [{"text": "hello"}]


def test_migrate_command_applies_and_reports_a_broken_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///data/app.db")
    root = make_root(tmp_path, tools=("db",))
    write_migration(root, "demo/001_ok.sql", "CREATE TABLE ok (x INTEGER);")
    assert Kernel(root).run(["migrate"]) == 0
    assert (root / "data" / "app.db").is_file()
    write_migration(root, "demo/002_broken.sql", "CREATE TABLE oops (;")
    assert Kernel(root).run(["migrate"]) == 1
    assert "db: DEAD:" in capsys.readouterr().err
