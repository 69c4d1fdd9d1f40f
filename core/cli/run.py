"""``keel run [--reload]``: boot the project and serve it until SIGINT/SIGTERM.

This is today's ``python main.py``.
"""

from __future__ import annotations

import argparse
from typing import Any

from core.cli.project import project_root
from core.settings import env_set


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "run",
        aliases=["serve"],
        help="boot the project and serve it",
        description="Boot every tool and plugin of the project and serve until SIGINT/SIGTERM.",
    )
    parser.add_argument(
        "--reload",
        action="store_true",
        help=(
            "reload plugin files as they change on disk, applying new migrations and reloading the "
            "plugins of a changed model first (turns on the plugin watcher: PLUGINS_WATCH=1)"
        ),
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from core import console
    from core.kernel import Kernel

    console.install()  # boot's first lines (a tool failing before the logger is set up) read the same

    if args.reload:
        env_set("PLUGINS_WATCH", "1")
    return Kernel(project_root(args)).run([])
