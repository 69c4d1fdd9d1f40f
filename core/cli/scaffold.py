"""``keel new domain|plugin|tool|migration``: write a file that boots as written, and its test.

Each file goes where the kernel discovers it, and its test goes beside it in the mirrored
``tests/`` tree, written against the project's own fixtures (``tests/kit.py``). Nothing is ever
overwritten: an existing file refuses the whole command before anything is written. Names are
lower-case Python identifiers (``notes``, ``price_list``), checked before anything is written.

- ``new domain NAME``: ``domains/NAME/plugins/index.py`` serving ``GET /NAME``.
- ``new plugin DOMAIN NAME``: ``domains/DOMAIN/plugins/NAME.py`` serving ``GET /DOMAIN/NAME``.
- ``new tool NAME``: ``tools/NAME/NAME_tool.py``, a tool injected into plugins as ``NAME``.
- ``new migration DOMAIN NAME``: ``migrations/DOMAIN/NNN_NAME.sql``, numbered after the last one
  (``create_<table>`` starts it with a ``CREATE TABLE``).
"""

from __future__ import annotations

import argparse
import keyword
import re
import string
from pathlib import Path
from typing import Any

from core.cli.project import CommandError, project_root

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
RESERVED = frozenset({"container", "tasks", "core", "tools", "domains", "tests"})


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "new",
        help="scaffold a domain, plugin, tool or migration (with its test)",
        description="Write a new file that boots as written, with its test in the mirrored tests/ tree.",
    )
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    domain = kinds.add_parser(
        "domain", help="a domain with one plugin", description="domains/NAME/plugins/index.py"
    )
    domain.add_argument("name", help="the domain (its routes live under /NAME)")
    plugin = kinds.add_parser(
        "plugin", help="a plugin in a domain", description="domains/DOMAIN/plugins/NAME.py"
    )
    plugin.add_argument("domain", help="an existing domain")
    plugin.add_argument("name", help="the plugin file's name")
    tool = kinds.add_parser("tool", help="a tool", description="tools/NAME/NAME_tool.py")
    tool.add_argument("name", help="the tool's name, which is the parameter plugins ask for")
    migration = kinds.add_parser(
        "migration", help="an SQL migration", description="migrations/DOMAIN/NNN_NAME.sql"
    )
    migration.add_argument("domain", help="the domain whose tables it changes")
    migration.add_argument("name", help="what it does, e.g. create_notes")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    root = project_root(args)
    files = plan(root, args.kind, vars(args))
    taken = [path for path in files if path.exists()]
    if taken:
        raise CommandError("refusing to overwrite " + ", ".join(str(p.relative_to(root)) for p in taken))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(root)}")
    return 0


def plan(root: Path, kind: str, values: dict[str, Any]) -> dict[Path, str]:
    """The files ``new <kind>`` would write, by path."""
    if kind == "domain":
        name = _checked("domain", values["name"])
        if (root / "domains" / name).exists():
            raise CommandError(
                f"the domain {name!r} already exists (add a plugin: keel new plugin {name} NAME)"
            )
        return _plugin_files(root, name, "index", f"/{name}", f"{_camel(name)}Index")
    if kind == "plugin":
        domain = _checked("domain", values["domain"])
        name = _checked("plugin", values["name"])
        if not (root / "domains" / domain).is_dir():
            raise CommandError(f"there is no domain {domain!r}; create it first: keel new domain {domain}")
        return _plugin_files(root, domain, name, f"/{domain}/{name.replace('_', '-')}", _camel(name))
    if kind == "tool":
        name = _checked("tool", values["name"])
        if (root / "tools" / name).exists():
            raise CommandError(f"tools/{name} already exists")
        cls = f"{_camel(name)}Tool"
        context = {"name": name, "cls": cls, "env": name.upper()}
        return {
            root / "tools" / name / f"{name}_tool.py": _fill(TOOL, context),
            root / "tests" / "tools" / name / f"test_{name}_tool.py": _fill(TOOL_TEST, context),
        }
    if kind == "migration":
        domain = _checked("domain", values["domain"])
        name = _checked("migration", values["name"])
        directory = root / "migrations" / domain
        numbers = [int(m.group(1)) for p in directory.glob("*.sql") if (m := re.match(r"^(\d+)_", p.name))]
        file_name = f"{max(numbers, default=0) + 1:03d}_{name}.sql"
        table = name.removeprefix("create_") if name.startswith("create_") and name != "create_" else ""
        body = (
            f"CREATE TABLE {table} (\n    id TEXT PRIMARY KEY,\n    created_at TEXT NOT NULL\n);\n"
            if table
            else "-- Write the statements here (portable SQL runs on SQLite and PostgreSQL).\n"
        )
        context = {"domain": domain, "file": file_name, "table": table, "name": name}
        return {
            directory / file_name: _fill(MIGRATION, context) + body,
            root / "tests" / "migrations" / domain / f"test_{file_name[:-4]}.py": _fill(
                MIGRATION_TEST, context
            ),
        }
    raise CommandError(f"unknown kind {kind!r}")


def _plugin_files(root: Path, domain: str, name: str, path: str, cls: str) -> dict[Path, str]:
    context = {"domain": domain, "name": name, "path": path, "cls": cls}
    return {
        root / "domains" / domain / "plugins" / f"{name}.py": _fill(PLUGIN, context),
        root / "tests" / "domains" / domain / f"test_{name}.py": _fill(PLUGIN_TEST, context),
    }


def _checked(what: str, name: str) -> str:
    if not NAME.match(name) or keyword.iskeyword(name) or name in RESERVED:
        raise CommandError(
            f"{name!r} is not a valid {what} name: use lower-case letters, digits and underscores, "
            "starting with a letter (e.g. notes, price_list), and not a Python keyword or "
            f"one of {', '.join(sorted(RESERVED))}"
        )
    return name


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part)


def _fill(template: str, context: dict[str, str]) -> str:
    return string.Template(template).substitute(context).lstrip()


PLUGIN = '''
"""``GET ${path}``: what the ${domain} domain answers (written by ``keel new``; make it yours).

A plugin asks for tools by naming them as ``__init__`` parameters; ``on_boot`` registers its routes.
A handler gets ``data`` (the validated body and query) and ``context`` (headers, identity, ...)
and returns the JSON body.
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin


class ${cls}(BasePlugin):
    """Answers ``GET ${path}``."""

    def __init__(self, http: Any) -> None:
        self.http = http

    async def on_boot(self) -> None:
        self.http.add_endpoint("${path}", "GET", self.answer, tags=["${domain}"])

    async def answer(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"domain": "${domain}", "plugin": "${name}"}
'''

PLUGIN_TEST = '''
"""``GET ${path}`` on a real kernel serving the project's http tool and the ${domain} domain."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.kit import make_root, serving


async def test_${name}_answers_get(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http",), domains=("${domain}",))
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        response = await client.get("${path}")
    assert response.status_code == 200, response.text
    assert response.json() == {"domain": "${domain}", "plugin": "${name}"}
'''

TOOL = '''
"""The ``${name}`` tool (written by ``keel new``; make it yours).

A tool is one external system or concern, constructed with no arguments, configured in
``setup()`` from the environment (``${env}_GREETING`` here), and injected into every plugin that
names ``${name}`` as an ``__init__`` parameter. Raise ``ToolNotConfiguredError`` in ``setup()`` to be
OFF instead of failing.
"""

from __future__ import annotations

from core import BaseTool
from core.settings import env_str


class ${cls}(BaseTool):
    """Greets people (a placeholder for what ${name} will really do)."""

    name = "${name}"

    def __init__(self) -> None:
        self.greeting = "hello"

    async def setup(self) -> None:
        self.greeting = env_str("${env}_GREETING", "hello")

    async def greet(self, who: str) -> str:
        """The greeting for ``who``."""
        return f"{self.greeting}, {who}"
'''

TOOL_TEST = '''
"""The ``${name}`` tool, set up as the kernel sets it up."""

from __future__ import annotations

import pytest

from tests.kit import PROJECT, started_tool
from tools.${name}.${name}_tool import ${cls}


async def test_greet_uses_the_configured_greeting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("${env}_GREETING", "hi")
    async with started_tool(${cls}, PROJECT) as tool:
        assert await tool.greet("ada") == "hi, ada"
'''

MIGRATION = """
-- ${domain}/${file} (written by keel new). Applied once, in its own transaction, at boot
-- or by `keel migrate`; never edit it once applied: add a new migration instead.
-- Another file first? Add a line: -- depends: other_domain/001_name.sql
"""

MIGRATION_TEST = '''
"""``${domain}/${file}`` applies on a fresh SQLite database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import PROJECT, started_tool
from tools.db.db_tool import DbTool


async def test_${name}_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'test.db'}")
    async with started_tool(DbTool, PROJECT) as db:
        rows = await db.query("SELECT name FROM keel_migrations WHERE name = $$1", ["${domain}/${file}"])
        assert len(rows) == 1
'''
