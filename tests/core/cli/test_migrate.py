"""``keel migrate [--status | --plan]`` on a temporary project, as a subprocess, on SQLite and on
PostgreSQL (a schema of its own: :func:`tests.conftest.fresh_postgres_schema`, passed to the
command as ``DATABASE_URL=...?search_path=<schema>``).

``--plan`` lists what is pending without applying it, ``--status`` shows applied and pending,
``migrate`` applies; a broken migration exits non-zero naming its file, and nothing of it stays
applied (its transaction is rolled back, and it is not recorded).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import DATABASE_ENGINES, database_url
from tests.core.cli.cli_kit import keel
from tests.kit import make_root, write

FIRST = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL);\n"
SECOND = "-- depends: notes/001_create_notes.sql\nALTER TABLE notes ADD COLUMN tag TEXT;\n"
# Its first statement would succeed alone; the second fails, so the whole file must roll back.
BROKEN = "CREATE TABLE half_done (id TEXT PRIMARY KEY);\nINSERT INTO no_such_table VALUES (1);\n"


@pytest.fixture(params=DATABASE_ENGINES)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A ``DATABASE_URL`` on a fresh database of each engine (SQLite: a file of the temporary root)."""
    async with database_url(request.param, sqlite_file=str(tmp_path / "keel.db")) as value:
        yield value


def project(tmp_path: Path) -> Path:
    root = make_root(tmp_path, tools=("logger", "db"))
    write(root, "migrations/notes/001_create_notes.sql", FIRST)
    write(root, "migrations/notes/002_tag_notes.sql", SECOND)
    return root


def states(output: str) -> dict[str, str]:
    """``{name: state}`` from the lines of ``migrate --status``."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^  (\S+\.sql)  +(\w+)", output, re.M)}


def test_plan_lists_the_pending_in_order_without_applying(tmp_path: Path, url: str) -> None:
    root = project(tmp_path)
    plan = keel(root, "migrate", "--plan", DATABASE_URL=url)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert plan.stdout.splitlines()[1:] == [
        "2 migration(s) would be applied, in this order:",
        "  1. notes/001_create_notes.sql",
        "  2. notes/002_tag_notes.sql",
    ], plan.stdout
    again = keel(root, "migrate", "--plan", DATABASE_URL=url)
    assert again.stdout == plan.stdout  # nothing was applied by the first
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert states(status.stdout) == {
        "notes/001_create_notes.sql": "pending",
        "notes/002_tag_notes.sql": "pending",
    }
    assert status.stdout.rstrip().endswith("0 applied, 2 pending")


def test_migrate_applies_and_status_shows_applied_then_the_new_one_pending(tmp_path: Path, url: str) -> None:
    root = project(tmp_path)
    done = keel(root, "migrate", DATABASE_URL=url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied migration notes/001_create_notes.sql" in done.stderr
    assert "applied migration notes/002_tag_notes.sql" in done.stderr
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert status.returncode == 0, status.stderr
    assert states(status.stdout) == {
        "notes/001_create_notes.sql": "applied",
        "notes/002_tag_notes.sql": "applied",
    }
    assert re.search(r"notes/001_create_notes\.sql  applied  \d{4}-\d\d-\d\dT", status.stdout)
    assert keel(root, "migrate", "--plan", DATABASE_URL=url).stdout.splitlines()[1:] == [
        "nothing to apply: every migration is applied"
    ]
    write(root, "migrations/notes/003_more.sql", "CREATE TABLE more_notes (id TEXT PRIMARY KEY);\n")
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert states(status.stdout)["notes/003_more.sql"] == "pending"
    assert status.stdout.rstrip().endswith("2 applied, 1 pending")
    assert keel(root, "migrate", DATABASE_URL=url).returncode == 0
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert status.stdout.rstrip().endswith("3 applied, 0 pending")


def test_a_broken_migration_fails_naming_its_file_and_nothing_of_it_is_applied(
    tmp_path: Path, url: str
) -> None:
    root = project(tmp_path)
    write(root, "migrations/notes/003_broken.sql", "-- depends: notes/002_tag_notes.sql\n" + BROKEN)
    done = keel(root, "migrate", DATABASE_URL=url)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "notes/003_broken.sql" in done.stderr, done.stderr
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert states(status.stdout) == {
        "notes/001_create_notes.sql": "applied",
        "notes/002_tag_notes.sql": "applied",
        "notes/003_broken.sql": "pending",
    }, status.stdout
    # The broken file's first statement was rolled back with it: once the file is fixed, its
    # CREATE TABLE runs again without "already exists".
    write(root, "migrations/notes/003_broken.sql", "CREATE TABLE half_done (id TEXT PRIMARY KEY);\n")
    fixed = keel(root, "migrate", DATABASE_URL=url)
    assert fixed.returncode == 0, fixed.stderr
    assert "applied migration notes/003_broken.sql" in fixed.stderr


def test_a_changed_applied_migration_is_reported_by_status_and_plan(tmp_path: Path, url: str) -> None:
    root = project(tmp_path)
    assert keel(root, "migrate", DATABASE_URL=url).returncode == 0
    write(root, "migrations/notes/001_create_notes.sql", FIRST + "-- edited after the fact\n")
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert status.returncode == 1
    assert states(status.stdout)["notes/001_create_notes.sql"] == "changed"
    assert "problem: applied migration(s) changed on disk: notes/001_create_notes.sql" in status.stdout
    plan = keel(root, "migrate", "--plan", DATABASE_URL=url)
    assert plan.returncode == 1
    assert "migrate would stop: applied migration(s) changed on disk" in plan.stdout


def test_status_without_migrations_says_so(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("logger", "db"))
    status = keel(root, "migrate", "--status", DATABASE_URL=f"sqlite:///{tmp_path / 'keel.db'}")
    assert status.returncode == 0, status.stderr
    assert "no migrations under migrations/" in status.stdout


def test_plan_and_status_are_exclusive(tmp_path: Path) -> None:
    both = keel(make_root(tmp_path, tools=("db",)), "migrate", "--plan", "--status")
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr


def test_a_missing_dependency_stops_migrate_and_the_plan_says_why(tmp_path: Path, url: str) -> None:
    root = project(tmp_path)
    write(root, "migrations/notes/003_orphan.sql", "-- depends: notes/009_missing.sql\nSELECT 1;\n")
    reason = "notes/003_orphan.sql depends on notes/009_missing.sql, which does not exist"
    plan = keel(root, "migrate", "--plan", DATABASE_URL=url)
    assert plan.returncode == 1
    assert plan.stdout.splitlines()[1:] == [f"migrate would stop: migration: {reason}"], plan.stdout
    done = keel(root, "migrate", DATABASE_URL=url)
    assert done.returncode != 0
    assert reason in done.stderr, done.stderr
    status = keel(root, "migrate", "--status", DATABASE_URL=url)
    assert set(states(status.stdout).values()) == {"pending"}, status.stdout  # not even 001 and 002
