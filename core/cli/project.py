"""What every subcommand needs: the project root, and a way to reach a tool's own code.

``core`` imports only the standard library, so a command that needs a tool's code does not import
it: :func:`tool_module` imports the file from the project root with the kernel's loader
(:func:`core.loader.import_file`), exactly as boot does, so the module is the root's own.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

from core.loader import import_file
from core.settings import env_str, load_dotenv

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class CommandError(Exception):
    """The command was refused; the message says why (printed as ``keel <command>: <message>``)."""


def project_root(args: argparse.Namespace) -> Path:
    """``--root``, else ``KEEL_ROOT``, else the current directory if it looks like a project, else
    the project ``core`` was loaded from."""
    explicit = getattr(args, "root", None) or env_str("KEEL_ROOT")
    if explicit:
        root = Path(explicit).resolve()
        if not root.is_dir():
            raise CommandError(f"the project root {root} is not a directory")
        return root
    here = Path.cwd()
    if (here / "domains").is_dir() or (here / "tools").is_dir():
        return here
    return PACKAGE_ROOT


def load_environment(root: Path) -> None:
    """Apply the root's ``.env`` (never overriding the environment), as boot does."""
    load_dotenv(root / ".env")


def tool_module(root: Path, tool: str, module: str) -> ModuleType:
    """``tools/<tool>/<module>.py`` of ``root``, imported as boot imports tool files."""
    path = root / "tools" / tool / f"{module}.py"
    if not path.is_file():
        raise CommandError(f"this project has no {path.relative_to(root)} (is the {tool} tool installed?)")
    return import_file(root, path)


def domain_module(root: Path, domain: str, module: str) -> ModuleType:
    """``domains/<domain>/<module>.py`` of ``root``, imported as boot imports plugin files."""
    path = root / "domains" / domain / f"{module}.py"
    if not path.is_file():
        raise CommandError(f"this project has no {path.relative_to(root)} (is the {domain} domain there?)")
    return import_file(root, path)
