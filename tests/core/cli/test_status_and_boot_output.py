"""``keel status`` against a real ``keel run`` (and against nothing), and what ``keel run`` prints
while it boots: plain through a pipe, coloured with FORCE_COLOR, JSON with LOG_FORMAT=json, one
line per failure naming its file and line, and the line with the URLs to open."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.core.cli.cli_kit import keel, keel_run
from tests.kit import PROJECT, free_port, make_root, started_tool, write

BROKEN = """
from core import BasePlugin


class Broken(BasePlugin):
    async def on_boot(self) -> None:
        raise RuntimeError("the demo is not configured")
"""
LINE = re.compile(r"\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: .*")


def project(tmp_path: Path) -> Path:
    """The http and system tools, the dashboard, the status and health endpoints, a broken plugin."""
    root = make_root(tmp_path, tools=("logger", "http", "system"), domains=("dashboard",))
    plugins = root / "domains" / "system" / "plugins"
    plugins.mkdir(parents=True)
    for name in ("status.py", "health.py"):
        (plugins / name).symlink_to(PROJECT / "domains" / "system" / "plugins" / name)
    write(root, "domains/demo/plugins/broken.py", BROKEN)
    return root


async def test_status_prints_a_running_instance_readably(tmp_path: Path) -> None:
    root = project(tmp_path)
    async with keel_run(root, tmp_path / "run.log") as running:
        done = keel(root, "status", "--url", running.url)
        as_json = keel(root, "status", "--url", running.url, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.match(rf"Keel at {re.escape(running.url)}: SERVING, up \d+s, pid \d+ on ", out), out
    assert "health: ok: 1 plugin(s) DEAD" in out
    assert re.search(r"^  OK    http\b", out, re.M), out
    assert re.search(r"^  READY    system\.SystemStatusPlugin +domains/system/plugins/status\.py$", out, re.M)
    assert re.search(
        r"^  DEAD     demo\.Broken +domains/demo/plugins/broken\.py  on_boot\(\) raised RuntimeError: "
        r"the demo is not configured",
        out,
        re.M,
    ), out
    assert "load errors: none" in out
    assert "\033[" not in out  # piped: no colour
    assert json.loads(as_json.stdout)["plugins"]["demo.Broken"]["status"] == "DEAD"


async def test_status_reads_the_address_from_the_settings(tmp_path: Path) -> None:
    root = project(tmp_path)
    async with keel_run(root, tmp_path / "run.log") as running:
        port = running.url.rsplit(":", 1)[1]
        (root / ".env").write_text(f"HOST=0.0.0.0\nPORT={port}\n")
        done = keel(root, "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Keel at http://127.0.0.1:{port}: SERVING")


def test_status_with_nothing_listening_says_so(tmp_path: Path) -> None:
    port = free_port()
    done = keel(make_root(tmp_path), "status", "--url", f"http://127.0.0.1:{port}", timeout=30)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"keel status: nothing answers at http://127.0.0.1:{port}/system/status")
    assert "is the service running (`keel run`)?" in done.stderr
    assert "Traceback" not in done.stderr


async def test_boot_output_through_a_pipe_is_plain_one_line_per_event(tmp_path: Path) -> None:
    root = project(tmp_path)
    async with keel_run(root, tmp_path / "run.log") as running:
        pass
    lines = running.output().splitlines()
    assert lines and all(LINE.fullmatch(line) for line in lines), running.output()
    failures = [line for line in lines if " ERROR " in line]
    assert len(failures) == 1, running.output()  # one line per failure, no traceback after it
    assert failures[0].endswith(
        "ERROR kernel: demo.Broken: on_boot() raised RuntimeError: the demo is not configured "
        "(domains/demo/plugins/broken.py:6)"
    ), failures[0]
    url = running.url
    assert any(
        line.endswith(f"INFO http: serving on {url} (API {url}, docs {url}/docs, dashboard {url}/system/)")
        for line in lines
    ), running.output()
    assert "\033[" not in running.output()


async def test_a_tool_whose_setup_fails_is_one_error_line(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("logger", "http"))
    async with keel_run(root, tmp_path / "run.log", ready=r"INFO kernel: booted ", PORT="eighty") as running:
        pass
    lines = running.output().splitlines()
    errors = [line for line in lines if " ERROR " in line]
    assert len(errors) == 1, running.output()
    assert (
        "ERROR registry: tool http is DEAD: setup() raised SettingError: PORT must be a whole number "
        in errors[0]
    )
    assert "got 'eighty' (http_tool.py:" in errors[0]
    assert all(LINE.fullmatch(line) for line in lines), running.output()


@pytest.mark.parametrize("force", ["1", "yes"])
async def test_force_color_colours_the_level_even_through_a_pipe(tmp_path: Path, force: str) -> None:
    async with keel_run(project(tmp_path), tmp_path / "run.log", FORCE_COLOR=force) as running:
        pass
    assert "\033[31mERROR\033[0m" in running.output()
    assert "\033[32mINFO\033[0m" in running.output()


async def test_no_color_wins_unless_forced(tmp_path: Path) -> None:
    async with keel_run(project(tmp_path), tmp_path / "run.log", NO_COLOR="1", FORCE_COLOR="0") as running:
        pass
    assert "\033[" not in running.output()


async def test_log_format_json_is_one_object_per_line(tmp_path: Path) -> None:
    async with keel_run(project(tmp_path), tmp_path / "run.log", LOG_FORMAT="json") as running:
        pass
    records = [json.loads(line) for line in running.output().splitlines()]
    assert all(set(r) >= {"time", "level", "name", "message"} for r in records)
    failure = next(r for r in records if r["level"] == "ERROR")
    assert failure["name"] == "kernel"
    assert failure["message"].endswith("(domains/demo/plugins/broken.py:6)")
    assert any(r["message"].startswith(f"serving on {running.url} (API ") for r in records)


async def test_status_of_an_instance_with_auth_needs_an_admin_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tools.auth.auth_tool import AuthTool

    secret = "s" * 40
    root = project(tmp_path)
    (root / "tools" / "auth").symlink_to(PROJECT / "tools" / "auth", target_is_directory=True)
    (root / "domains" / "auth_wiring").symlink_to(
        PROJECT / "domains" / "auth_wiring", target_is_directory=True
    )
    monkeypatch.setenv("AUTH_SECRET_KEY", secret)
    async with started_tool(AuthTool, root) as auth:
        token = auth.create_token("ada", {"admin": True})
    async with keel_run(root, tmp_path / "run.log", AUTH_SECRET_KEY=secret) as running:
        refused = keel(root, "status", "--url", running.url)
        with_flag = keel(root, "status", "--url", running.url, "--token", token)
        from_environment = keel(root, "status", "--url", running.url, KEEL_TOKEN=token)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        f"keel status: {running.url}/system/status answered 401: it needs an admin"
    )
    assert "pass --token or set KEEL_TOKEN" in refused.stderr
    for done in (with_flag, from_environment):
        assert done.returncode == 0, done.stderr
        assert re.search(r"^  OK    auth\b", done.stdout, re.M), done.stdout


async def test_a_tool_whose_boot_complete_hook_fails_is_one_error_line(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("logger", "http"))
    write(
        root,
        "tools/fragile/fragile_tool.py",
        """
        from core import BaseTool


        class FragileTool(BaseTool):
            name = "fragile"

            async def on_boot_complete(self, container):
                raise OSError("the spool is full")
        """,
    )
    async with keel_run(root, tmp_path / "run.log") as running:
        pass
    errors = [line for line in running.output().splitlines() if " ERROR " in line or " WARNING " in line]
    assert len(errors) == 1, running.output()
    assert errors[0].endswith(
        "ERROR kernel: fragile.on_boot_complete: on_boot_complete() raised OSError: the spool is full "
        "(tools/fragile/fragile_tool.py:8)"
    ), errors[0]


async def test_a_plugin_missing_a_tool_is_one_error_line_naming_its_init(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("logger", "http"))
    write(
        root,
        "domains/demo/plugins/needy.py",
        """
        from core import BasePlugin


        class Needy(BasePlugin):
            def __init__(self, http, mailer):
                self.mailer = mailer
        """,
    )
    async with keel_run(root, tmp_path / "run.log") as running:
        pass
    errors = [line for line in running.output().splitlines() if " ERROR " in line]
    assert len(errors) == 1, running.output()
    assert errors[0].endswith(
        "ERROR kernel: plugin demo.Needy is DEAD: missing required tools: mailer "
        "(domains/demo/plugins/needy.py:5)"
    ), errors[0]
