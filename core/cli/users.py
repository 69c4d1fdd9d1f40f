"""``keel users create NAME [--admin]`` and ``keel users token NAME``: accounts from the command line.

The commands belong to the users domain (``domains/users/commands.py``, which boots the tools and
uses the db and auth tools); this module only hands the arguments over, importing that file from
the project root as boot imports plugin files. ``python main.py users ...`` arrives here too.
"""

from __future__ import annotations

import argparse
from typing import Any

from core.cli.project import domain_module, project_root


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "users",
        help="create an account (--admin) or print a bearer token for one",
        description=(
            "Account commands of the users domain: `users create NAME [--admin]`, `users token NAME`."
        ),
        add_help=False,
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="create | token, and their arguments")
    parser.set_defaults(handler=handle, passes_arguments_on=True)


def handle(args: argparse.Namespace) -> int:
    root = project_root(args)
    commands = domain_module(root, "users", "commands")
    code: int = commands.main(list(args.arguments), root=root, prog="keel users")
    return code
