"""``keel check``: each plugin mistake it exists for is reported as ``path:line: message`` with exit 1,
a clean project (a scaffolded one too, and this repository) passes with exit 0.

The command runs as a subprocess in a temporary project (``tests.kit.make_root``, linking a few of
the project's tools), as an author runs it; ``PYTHONPATH`` points at this checkout so its ``core`` is
the one run. The finer points of each check are asserted on :func:`core.cli.checks.check_source`
directly, with the facts stated outright.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.cli.check import place
from core.cli.checks import Facts, PluginFile, check_source
from tests.kit import PROJECT, make_root, write

TOOLS = ("http", "db", "event_bus")

CLEAN = """
    from typing import Any

    from core import BasePlugin
    from domains.shop.prices import PRICE

    BASE = "/shop/items"


    class Items(BasePlugin):
        def __init__(self, http: Any, db: Any, container: Any, tasks: Any, cluster: Any = None) -> None:
            self.http = http
            self.db = db

        async def on_boot(self) -> None:
            await self.db.execute("SELECT 1")
            self.http.add_endpoint(BASE, "GET", self.items)
            self.http.add_sse_endpoint(f"/shop/items/{PRICE}/events", self.items)
            self.http.add_endpoint("/shop", "GET", self.items)

        async def items(self, data: dict[str, Any], context: dict[str, Any]) -> list[Any]:
            return await self.db.query("SELECT 1")
"""

MISTAKES = {
    "unknown tool parameter": (
        """
        from core import BasePlugin


        class Items(BasePlugin):
            def __init__(self, http, dbb):
                self.http = http
        """,
        "domains/shop/plugins/items.py:5: __init__ parameter 'dbb' names no tool of this project; "
        "did you mean 'db'?",
    ),
    "coroutine without await": (
        """
        from core import BasePlugin


        class Items(BasePlugin):
            def __init__(self, db):
                self.db = db

            async def on_boot(self):
                self.db.execute("CREATE TABLE items (id INTEGER)")
        """,
        "domains/shop/plugins/items.py:9: self.db.execute(...) is a coroutine of the db tool and is never "
        "awaited (write await self.db.execute(...))",
    ),
    "cross-domain import": (
        """
        from core import BasePlugin
        from domains.billing.prices import PRICE


        class Items(BasePlugin):
            pass
        """,
        "domains/shop/plugins/items.py:2: imports domains.billing.prices from the billing domain: domains "
        "do not import each other (share through a tool such as the event bus, or through core)",
    ),
    "tools import": (
        """
        from core import BasePlugin
        from tools.db.db_tool import DbTool


        class Items(BasePlugin):
            pass
        """,
        "domains/shop/plugins/items.py:2: imports tools.db.db_tool: plugins get tools by injection (an "
        "__init__ parameter named after the tool), and type them with core.tool_ports",
    ),
    "route outside the domain's prefix": (
        """
        from core import BasePlugin


        class Items(BasePlugin):
            def __init__(self, http):
                self.http = http

            def on_boot(self):
                self.http.add_endpoint("/billing/items", "GET", self.items)

            def items(self, data, context):
                return []
        """,
        "domains/shop/plugins/items.py:9: route '/billing/items' is outside the shop domain's prefix /shop/",
    ),
    "syntax error": (
        """
        from core import BasePlugin


        class Items(BasePlugin:
            pass
        """,
        "domains/shop/plugins/items.py:4: syntax error: ",
    ),
}


def keel(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(PROJECT)}
    environment.pop("KEEL_ROOT", None)
    return subprocess.run(
        [sys.executable, "-m", "core.cli", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def project(tmp_path: Path, plugin: str) -> Path:
    root = make_root(tmp_path, tools=TOOLS)
    write(root, "domains/shop/prices.py", "PRICE = 3\n")
    write(root, "domains/billing/prices.py", "PRICE = 4\n")
    write(root, "domains/shop/plugins/items.py", plugin)
    return root


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_is_reported_with_its_line_and_fails_the_check(tmp_path: Path, mistake: str) -> None:
    source, expected = MISTAKES[mistake]
    result = keel(project(tmp_path, source), "check")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert "1 problem(s) in 1 file" in result.stderr


def test_a_clean_project_passes(tmp_path: Path) -> None:
    result = keel(project(tmp_path, CLEAN), "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "ok: 1 file checked, nothing found\n"


def test_a_path_on_the_command_line_is_checked_instead(tmp_path: Path) -> None:
    root = project(tmp_path, CLEAN)
    broken = write(root, "domains/shop/plugins/_draft.py", MISTAKES["tools import"][0])
    assert keel(root, "check").returncode == 0  # _private files are not plugins
    result = keel(root, "check", str(broken))
    assert result.returncode == 1
    assert result.stdout.startswith("domains/shop/plugins/_draft.py:2: imports tools.db.db_tool")
    missing = keel(root, "check", "nowhere.py")
    assert missing.returncode == 1 and "keel check: nowhere.py: no such file or folder" in missing.stderr


def test_a_tool_file_that_does_not_import_is_reported_itself(tmp_path: Path) -> None:
    root = project(tmp_path, CLEAN)
    write(root, "tools/mailer/mailer_tool.py", "import keel_no_such_module\n")
    result = keel(root, "check")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "tools/mailer/mailer_tool.py:1: this tool file does not import "
        "(ModuleNotFoundError: No module named 'keel_no_such_module')"
    ]


def test_a_scaffolded_domain_passes(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=TOOLS)
    assert keel(root, "new", "domain", "notes").returncode == 0
    assert keel(root, "new", "plugin", "notes", "price_list").returncode == 0
    result = keel(root, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "ok: 2 files checked, nothing found\n"


def test_help_describes_the_command(tmp_path: Path) -> None:
    result = keel(tmp_path, "check", "--help")
    assert result.returncode == 0
    assert "usage: keel check" in result.stdout and "without await" in result.stdout


def test_this_repository_passes() -> None:
    result = subprocess.run(
        [sys.executable, "main.py", "check"], cwd=PROJECT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok: ")


# -- the checks' finer points, on the source directly ---------------------------------------------

FACTS = Facts(
    parameters=frozenset({"http", "db", "scheduler", "container", "tasks"}),
    coroutines={"http": frozenset(), "db": frozenset({"execute", "query"}), "scheduler": frozenset({"at"})},
    system_domains=frozenset({"system", "dashboard"}),
)


def findings(source: str, shown: str = "domains/shop/plugins/items.py") -> list[str]:
    module = shown[:-3].replace("/", ".")
    domain = shown.split("/")[1]
    return [str(f) for f in check_source(textwrap.dedent(source), PluginFile(shown, module, domain), FACTS)]


def test_an_optional_parameter_is_reported_only_when_it_looks_like_a_misspelt_tool() -> None:
    source = """
        from core import BasePlugin

        class Items(BasePlugin):
            def __init__(self, http, *, schedular=None, mailer=None, **extra):
                pass
    """
    assert findings(source) == [
        "domains/shop/plugins/items.py:5: __init__ parameter 'schedular' names no tool of this project; "
        "did you mean 'scheduler'?"
    ]
    required = "from core import BasePlugin\nclass A(BasePlugin):\n    def __init__(self, mailer): pass\n"
    assert findings(required) == [
        "domains/shop/plugins/items.py:3: __init__ parameter 'mailer' names no tool of this project (the "
        "kernel injects tools by parameter name; give it a default if it is optional)"
    ]


def test_a_class_that_is_not_a_plugin_is_not_held_to_injection() -> None:
    source = """
        from core import BasePlugin

        class Throttle:
            def __init__(self, limit, db):
                db.execute("x")

        class Base(BasePlugin):
            pass

        class Items(Base):
            def __init__(self, dbx):
                pass
    """
    assert [line.split(": ", 1)[1] for line in findings(source)] == [
        "__init__ parameter 'dbx' names no tool of this project; did you mean 'db'?"
    ]


def test_unawaited_calls_are_followed_through_the_parameter_an_attribute_and_a_local_alias() -> None:
    source = """
        import asyncio
        from core import BasePlugin

        class Items(BasePlugin):
            def __init__(self, db, scheduler=None):
                self.store = db
                self.jobs: object = scheduler
                db.query("in init")

            async def on_boot(self):
                await self.store.execute("fine")
                task = asyncio.create_task(self.store.execute("kept"))
                database = self.store
                database.execute("alias")
                self.jobs.at("later")
                self.store.transaction()

                def nested():
                    self.store.query("nested")
    """
    assert [line.split(": ", 1)[0] for line in findings(source)] == [
        "domains/shop/plugins/items.py:9",
        "domains/shop/plugins/items.py:15",
        "domains/shop/plugins/items.py:16",
        "domains/shop/plugins/items.py:20",
    ]


def test_a_subclass_is_held_to_the_init_it_inherits_from_the_file() -> None:
    source = """
        from core import BasePlugin

        class Base(BasePlugin):
            def __init__(self, db):
                self.db = db

        class Items(Base):
            def on_boot(self):
                self.db.query("x")
    """
    assert [line.split(": ", 1)[0] for line in findings(source)] == ["domains/shop/plugins/items.py:10"]


def test_relative_imports_are_resolved_against_the_files_place() -> None:
    source = """
        from . import helpers
        from .. import prices
        from ...billing import prices as other
        from domains import shop, billing
        import domains.billing.models
        from tools import db
    """
    assert [line.split(": ", 1)[1].split(":")[0] for line in findings(source)] == [
        "imports domains.billing from the billing domain",
        "imports domains.billing from the billing domain",
        "imports domains.billing.models from the billing domain",
        "imports tools.db",
    ]


def test_route_paths_are_followed_through_constants_aliases_and_literal_starts() -> None:
    source = """
        from core import BasePlugin

        PAGE = "/system/"
        OTHER = "/billing"

        class Items(BasePlugin):
            def __init__(self, http):
                self.http = http

            def on_boot(self):
                add = self.http.add_endpoint
                add(OTHER, "GET", self.on_boot)
                self.http.add_page(PAGE, "<p>")
                self.http.add_sse_endpoint(path=f"/billing/{1}", stream=self.on_boot)
                self.http.add_endpoint("/shop-items", "GET", self.on_boot)
                self.http.add_endpoint("/" + "x", "GET", self.on_boot)
                self.http.add_endpoint(f"/{OTHER}/x", "GET", self.on_boot)
    """
    found = findings(source)
    assert [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in found] == ["13", "14", "15", "16"]
    assert "'/billing/'... is outside the shop domain's prefix /shop/" in found[2]
    assert "/system/ belongs to the system domains: dashboard, system" in found[1]
    dashboard = findings(source.replace("OTHER, ", "PAGE, "), "domains/dashboard/plugins/page.py")
    assert [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in dashboard] == ["15", "16"]


def test_a_file_is_placed_by_where_it_sits(tmp_path: Path) -> None:
    root = tmp_path / "root"
    inside = place(root, root / "domains" / "shop" / "plugins" / "items.py")
    assert inside == PluginFile("domains/shop/plugins/items.py", "domains.shop.plugins.items", "shop")
    elsewhere = tmp_path / "draft" / "domains" / "notes" / "plugins" / "x.py"
    assert place(root, elsewhere) == PluginFile(str(elsewhere), None, "notes")
    assert place(root, tmp_path / "loose.py").domain is None
    assert place(root, root / "tools" / "db" / "db_tool.py").domain is None
