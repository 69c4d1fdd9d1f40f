"""``--help`` on ``keel`` and on every subcommand exits 0 and prints that command's usage, without
booting anything; ``keel`` with no command prints the usage and exits 2.

Run on this repository (``keel users`` hands its arguments to the users domain's own parser, so
its help needs a project that has the users domain), through ``python -m core.cli`` as a person
without the console script runs it, and through ``python main.py``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from core.cli import GROUPS, build_parser
from tests.core.cli.cli_kit import environment, keel
from tests.kit import PROJECT

# Each command line, and how its usage line starts.
COMMANDS = {
    (): "usage: keel [-h] [--root ROOT] COMMAND",
    ("run",): "usage: keel run [-h] [--reload]",
    ("serve",): "usage: keel run [-h] [--reload]",
    ("new",): "usage: keel new [-h] KIND",
    ("new", "domain"): "usage: keel new domain [-h] name",
    ("new", "plugin"): "usage: keel new plugin [-h] domain name",
    ("new", "tool"): "usage: keel new tool [-h] name",
    ("new", "migration"): "usage: keel new migration [-h] domain name",
    ("migrate",): "usage: keel migrate [-h] [--status | --plan]",
    ("users",): "usage: keel users [-h] COMMAND",
    ("users", "create"): "usage: keel users create [-h] [--admin]",
    ("users", "token"): "usage: keel users token [-h] [--minutes MINUTES] username",
    ("routes",): "usage: keel routes [-h] [--json]",
    ("check",): "usage: keel check [-h]",
    ("doctor",): "usage: keel doctor [-h]",
    ("status",): "usage: keel status [-h]",
}


@pytest.mark.parametrize("command", list(COMMANDS), ids=lambda c: " ".join(c) or "keel")
def test_help_exits_zero_and_prints_the_usage(command: tuple[str, ...]) -> None:
    result = keel(PROJECT, *command, "--help", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(COMMANDS[command]), result.stdout
    assert result.stderr == ""  # nothing booted, nothing logged


def test_every_subcommand_is_covered() -> None:
    """A subcommand added to the parser without a line above fails here, not silently."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {c[0] for c in COMMANDS if c} == set(commands.choices)
    assert len(GROUPS) == len({c[0] for c in COMMANDS if c}) - 1  # `serve` is the alias of `run`


def test_the_top_level_help_lists_every_command() -> None:
    result = keel(PROJECT, "--help")
    for name in ("run", "new", "migrate", "users", "routes", "check", "doctor", "status"):
        assert f"\n    {name}" in result.stdout, result.stdout


def test_no_command_prints_the_usage_and_exits_2() -> None:
    result = keel(PROJECT)
    assert result.returncode == 2
    assert result.stdout.startswith("usage: keel ")


def test_main_py_help_is_the_keel_help() -> None:
    result = subprocess.run(
        [sys.executable, "main.py", "--help"],
        cwd=PROJECT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == keel(PROJECT, "--help").stdout
