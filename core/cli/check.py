"""``keel check``: static checks a plugin author wants before booting, one ``path:line: message`` each.

Every plugin file (``domains/*/plugins/*.py``, not ``_private.py``, as boot finds them) or the files
and folders named on the command line is parsed, never imported or run, and checked for what boot
would report late or never (:mod:`core.cli.checks`): ``__init__`` parameters that name no tool, tool
coroutines called without ``await``, imports of another domain or of a tool, routes outside the
domain's prefix. Only the tools are imported, to learn their names and coroutine methods
(:mod:`core.cli.checks.facts`), and a tool file that does not import is reported too. Exit 1 when
anything is found (the findings on stdout, a count on stderr), else 0 with a one-line summary.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.cli.checks import Facts, Finding, PluginFile, check_source
from core.cli.checks.facts import gather
from core.cli.project import CommandError, load_environment, project_root
from core.loader import module_name


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "check",
        help="static checks on the plugins: unknown tools, missing await, imports, route prefixes",
        description=(
            "Check plugin files without booting: __init__ parameters that name no tool, tool coroutines "
            "called without await, imports of another domain or of tools.*, routes outside the domain's "
            "prefix. Prints path:line: message per finding; exits 1 if there is any."
        ),
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or folders to check instead of every domains/*/plugins/*.py of the root",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    root = project_root(args)
    files = explicit_files(args.paths) if args.paths else plugin_files(root)
    load_environment(root)
    facts, findings = gather(root)
    findings += check_files(root, files, facts)
    for finding in findings:
        print(finding)
    count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    if findings:
        print(f"keel check: {len(findings)} problem(s) in {count}", file=sys.stderr)
        return 1
    print(f"ok: {count} checked, nothing found")
    return 0


def check_files(root: Path, files: Iterable[Path], facts: Facts) -> list[Finding]:
    findings: list[Finding] = []
    for path in files:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        findings.extend(check_source(source, place(root, path), facts))
    return findings


def place(root: Path, path: Path) -> PluginFile:
    """Where ``path`` sits: shown relative to the root when inside it, its module and domain."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        parts = absolute.parts
        domain = parts[parts.index("domains") + 1] if "domains" in parts[:-2] else None
        return PluginFile(str(path), None, domain)
    parts = relative.parts
    domain = parts[1] if len(parts) > 2 and parts[0] == "domains" else None
    return PluginFile(str(relative), module_name(root, absolute), domain)


def plugin_files(root: Path) -> list[Path]:
    """``domains/*/plugins/*.py`` but ``_private.py``, sorted as boot sorts them."""
    return sorted(path for path in root.glob("domains/*/plugins/*.py") if not path.name.startswith("_"))


def explicit_files(paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts))
        elif path.is_file():
            files.append(path)
        else:
            raise CommandError(f"{text}: no such file or folder")
    return files
