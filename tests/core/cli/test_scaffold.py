"""``keel new domain|plugin|tool|migration`` in a temporary project, as a subprocess: what it writes
boots (``keel run`` serves the new routes as the scaffold says, the new tool is OK), the new
migration is applied by ``keel migrate`` and shown applied by ``migrate --status``, and the tests
written beside the files pass when pytest runs them as a subprocess in that project. An existing
domain or file is never overwritten: the command refuses with a clear message, exit 1, and writes
nothing.

The project gets a copy of ``tests/kit.py`` (the scaffolded tests use its fixtures, and its
``PROJECT`` must be the temporary root, so it is copied, not linked) and a ``pytest.ini`` with the
settings of this repository's ``pyproject.toml`` that the tests need.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx

from tests.core.cli.cli_kit import environment, keel, keel_run
from tests.kit import PROJECT, make_root, write

PYTEST_INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
pythonpath = .
addopts = -p no:cacheprovider --import-mode=importlib
filterwarnings =
    error
    ignore::DeprecationWarning:websockets.*
    ignore::DeprecationWarning:uvicorn.*
"""


def project(tmp_path: Path) -> Path:
    """Logger, http, db and system tools, and the system status endpoint (for ``keel status``)."""
    root = make_root(tmp_path, tools=("logger", "http", "db", "system"))
    plugins = root / "domains" / "system" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "status.py").symlink_to(PROJECT / "domains" / "system" / "plugins" / "status.py")
    (root / "tests").mkdir()
    shutil.copy(PROJECT / "tests" / "kit.py", root / "tests" / "kit.py")
    write(root, "pytest.ini", PYTEST_INI)
    return root


def new(root: Path, *arguments: str) -> list[str]:
    """``keel new ARGUMENTS``, which must succeed: the files it says it wrote."""
    done = keel(root, "new", *arguments)
    assert done.returncode == 0, done.stdout + done.stderr
    written = [line.removeprefix("wrote ") for line in done.stdout.splitlines()]
    assert all((root / path).is_file() for path in written), done.stdout
    return written


def snapshot(root: Path) -> dict[str, str]:
    """Every file the project holds (links not followed), with its text."""
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.is_symlink() for part in (p, *p.parents))
    }


async def test_a_scaffolded_project_boots_serves_and_migrates(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert new(root, "domain", "notes") == [
        "domains/notes/plugins/index.py",
        "tests/domains/notes/test_index.py",
    ]
    assert new(root, "plugin", "notes", "price_list") == [
        "domains/notes/plugins/price_list.py",
        "tests/domains/notes/test_price_list.py",
    ]
    assert new(root, "tool", "greeter") == [
        "tools/greeter/greeter_tool.py",
        "tests/tools/greeter/test_greeter_tool.py",
    ]
    assert new(root, "migration", "notes", "create_notes") == [
        "migrations/notes/001_create_notes.sql",
        "tests/migrations/notes/test_001_create_notes.py",
    ]
    assert "CREATE TABLE notes (" in (root / "migrations/notes/001_create_notes.sql").read_text()

    pending = keel(root, "migrate", "--status")
    assert "notes/001_create_notes.sql  pending" in pending.stdout, pending.stdout + pending.stderr
    migrated = keel(root, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "applied migration notes/001_create_notes.sql" in migrated.stderr
    status = keel(root, "migrate", "--status")
    assert status.returncode == 0, status.stderr
    assert "notes/001_create_notes.sql  applied  " in status.stdout
    assert status.stdout.rstrip().endswith("1 applied, 0 pending")

    async with keel_run(root, tmp_path / "run.log") as running:
        async with httpx.AsyncClient(base_url=running.url) as client:
            index = await client.get("/notes")
            price_list = await client.get("/notes/price-list")
        dump = json.loads(keel(root, "status", "--url", running.url, "--json").stdout)
    assert index.status_code == 200, index.text
    assert index.json() == {"domain": "notes", "plugin": "index"}
    assert price_list.status_code == 200, price_list.text
    assert price_list.json() == {"domain": "notes", "plugin": "price_list"}
    assert dump["tools"]["greeter"]["status"] == "OK", dump["tools"]
    assert {p["status"] for p in dump["plugins"].values()} == {"READY"}, dump["plugins"]
    assert " ERROR " not in running.output(), running.output()  # (a busy machine may log a stall WARNING)


def test_the_tests_written_beside_the_files_pass(tmp_path: Path) -> None:
    root = project(tmp_path)
    new(root, "domain", "notes")
    new(root, "plugin", "notes", "price_list")
    new(root, "tool", "greeter")
    new(root, "migration", "notes", "create_notes")
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "tests"],
        cwd=root,
        env=environment(PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "4 passed" in tests.stdout, tests.stdout


def test_migrations_are_numbered_after_the_last(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root, "migrations/notes/007_old.sql", "CREATE TABLE old_notes (id TEXT PRIMARY KEY);\n")
    assert new(root, "migration", "notes", "tag_notes")[0] == "migrations/notes/008_tag_notes.sql"
    assert keel(root, "migrate").returncode == 0
    assert keel(root, "migrate", "--status").stdout.rstrip().endswith("2 applied, 0 pending")


def test_an_existing_domain_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = project(tmp_path)
    new(root, "domain", "notes")
    (root / "domains/notes/plugins/index.py").write_text("# mine now\n")
    before = snapshot(root)
    again = keel(root, "new", "domain", "notes")
    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr == (
        "keel new: the domain 'notes' already exists (add a plugin: keel new plugin notes NAME)\n"
    )
    assert snapshot(root) == before


def test_an_existing_file_refuses_the_whole_command(tmp_path: Path) -> None:
    root = project(tmp_path)
    new(root, "domain", "notes")
    write(root, "tests/domains/notes/test_price_list.py", "# a test of my own\n")
    before = snapshot(root)
    refused = keel(root, "new", "plugin", "notes", "price_list")
    assert refused.returncode == 1
    assert refused.stderr == "keel new: refusing to overwrite tests/domains/notes/test_price_list.py\n"
    assert snapshot(root) == before  # not even the plugin file, which did not exist
    write(root, "tools/greeter/notes.txt", "taken\n")
    tool = keel(root, "new", "tool", "greeter")
    assert tool.returncode == 1 and tool.stderr == "keel new: tools/greeter already exists\n"


def test_a_bad_name_or_a_missing_domain_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    before = snapshot(root)
    for arguments, message in [
        (("domain", "Notes"), "keel new: 'Notes' is not a valid domain name: use lower-case letters"),
        (("domain", "class"), "keel new: 'class' is not a valid domain name"),
        (("tool", "tasks"), "keel new: 'tasks' is not a valid tool name"),
        (("migration", "notes", "1st"), "keel new: '1st' is not a valid migration name"),
        (("plugin", "nowhere", "items"), "keel new: there is no domain 'nowhere'; create it first"),
    ]:
        refused = keel(root, "new", *arguments)
        assert refused.returncode == 1, arguments
        assert refused.stderr.startswith(message), refused.stderr
    assert snapshot(root) == before
