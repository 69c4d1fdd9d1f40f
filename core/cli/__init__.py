"""The ``keel`` command: one argparse front for running, scaffolding and inspecting a project.

``keel`` (the console script from ``pyproject.toml``) and ``python main.py <command>`` both call
:func:`main`. Each subcommand group lives in a module of its own with a ``register(commands)``
that adds its parser and sets ``handler`` to a function of the parsed arguments returning the exit
code. ``python main.py`` with no command is ``keel run``.

The project root is ``--root``, else ``KEEL_ROOT``, else the current directory when it holds a
``domains/`` or ``tools/`` folder, else the project this ``core`` belongs to. ``core`` imports only
the standard library, so what needs a tool's code (the migration report, a token) is reached the way
the kernel reaches tools: by booting them, or by importing the tool's file from the root
(:func:`core.cli.project.tool_module`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from core.cli import check, doctor, migrate, routes, run, scaffold, status, users
from core.cli.project import CommandError
from core.settings import DotenvError

__all__ = ["CommandError", "build_parser", "main"]

GROUPS = (run, scaffold, migrate, users, routes, check, doctor, status)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="keel",
        description="Run, scaffold and inspect a Keel project.",
        epilog="Every command has its own --help. With no command, `python main.py` runs the service.",
    )
    parser.add_argument("--root", help="the project root (default: KEEL_ROOT, else the current directory)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(arguments)
        if extra and not getattr(args, "passes_arguments_on", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 0
    if extra:  # a command that hands its arguments to another parser (`keel users --help`)
        args.arguments = [*extra, *args.arguments]
    if args.command is None:
        parser.print_help()
        return 2
    try:
        code: int = args.handler(args)
    except (CommandError, DotenvError) as exc:  # a bad .env line names its file and line
        print(f"keel {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code
