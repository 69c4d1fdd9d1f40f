"""``keel users create [--admin] NAME`` and ``keel users token NAME``: accounts from the command line.

This is how the first admin comes to exist: registering over HTTP only ever gives the ``user``
role. The command boots the project's tools only (which applies migrations, like ``main.py
migrate``), creates the account with :func:`domains.users.accounts.create_account`, and stops. The
password is ``--password`` (convenient, but ``ps`` and the shell history show it), else read from
standard input when that is a pipe or ``--password-stdin`` is given (for scripts), else asked for
twice on the terminal. ``--admin`` on a name that already exists grants that account the admin role
instead (its password is kept).

``users token NAME`` prints a bearer token for an existing account, signed by the auth tool with the
same claims ``POST /users/login`` gives (``sub`` the account id, ``username``, ``roles``): for curl
(``-H "Authorization: Bearer $(keel users token root)"``) and the dashboard's token field.

The ``keel`` command (:mod:`core.cli.users`) and ``python main.py users`` both come here.
:func:`create_user` and :func:`issue_token` are the callable parts. Exit codes: 0 done, 1 refused (a
taken name, a bad password, an unknown account, a tool that cannot start), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core import ConflictError, Kernel
from domains.users.accounts import ADMIN_ROLES, USER_ROLES, create_account, grant_admin
from domains.users.models.user import RegisterRequest


class CommandError(Exception):
    """The command was refused; the message says why."""


def _require_tools(kernel: Kernel) -> None:
    tools = kernel.registry.get_system_dump()["tools"]
    for name in ("db", "auth"):
        status = tools.get(name, {}).get("status")
        if status != "OK":
            message = tools.get(name, {}).get("message") or "not found"
            raise CommandError(f"the {name} tool is {status or 'missing'}: {message}")


async def create_user(
    username: str, password: str | None, *, admin: bool = False, root: Path | None = None
) -> str:
    """Create the account (or, with ``admin``, promote an existing one); a line saying what was done."""
    kernel = Kernel(root)
    await kernel.boot(plugins=False)
    try:
        _require_tools(kernel)
        db: Any = kernel.container.get("db")
        auth: Any = kernel.container.get("auth")
        lowered = username.lower()
        if admin and password is None:
            if await grant_admin(db, lowered):
                return f"{lowered} is now an admin"
            raise CommandError(
                f"there is no account {lowered!r} to make an admin; give a password to create it"
            )
        if password is None:
            raise CommandError("a password is required to create an account")
        try:
            RegisterRequest(username=username, password=password)
        except ValidationError as exc:
            fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise CommandError(fields) from None
        try:
            row = await create_account(db, auth, username, password, ADMIN_ROLES if admin else USER_ROLES)
        except ConflictError as exc:
            if admin and await grant_admin(db, lowered):
                return f"{lowered} already exists and is now an admin (its password is unchanged)"
            raise CommandError(str(exc)) from None
        return f"created {row['username']} ({row['roles']}), id {row['id']}"
    finally:
        await kernel.shutdown()


async def issue_token(username: str, *, minutes: int | None = None, root: Path | None = None) -> str:
    """A bearer token for the existing account ``username``, with the claims a login gives."""
    kernel = Kernel(root)
    await kernel.boot(plugins=False)
    try:
        _require_tools(kernel)
        db: Any = kernel.container.get("db")
        auth: Any = kernel.container.get("auth")
        row = await db.query_one(
            "SELECT id, username, roles FROM users WHERE username = $1", [username.lower()]
        )
        if row is None:
            raise CommandError(
                f"there is no account {username.lower()!r}; create it with `keel users create`"
            )
        lifetime = timedelta(minutes=minutes) if minutes is not None else None
        token: str = auth.create_token(
            row["id"], {"username": row["username"], "roles": str(row["roles"]).split()}, lifetime
        )
        return token
    finally:
        await kernel.shutdown()


def build_parser(prog: str = "main.py users") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Manage user accounts.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = commands.add_parser(
        "create",
        help="create an account (the first admin, say)",
        description="Create an account; with --admin, or make an existing account an admin.",
    )
    create.add_argument("username")
    create.add_argument("--admin", action="store_true", help="give it the admin role")
    create.add_argument("--password", help="the password (visible to ps and shell history; prefer stdin)")
    create.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    token = commands.add_parser(
        "token",
        help="print a bearer token for an account (for curl and the dashboard)",
        description="Print a signed bearer token for an existing account, as POST /users/login gives.",
    )
    token.add_argument("username")
    token.add_argument("--minutes", type=int, help="its lifetime (default: AUTH_TOKEN_EXPIRE_MINUTES)")
    return parser


def main(argv: list[str], *, root: Path | None = None, prog: str = "main.py users") -> int:
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "token":
            print(asyncio.run(issue_token(args.username, minutes=args.minutes, root=root)))
            return 0
        password = args.password if args.password is not None else _password(args.password_stdin)
        print(asyncio.run(create_user(args.username, password, admin=args.admin, root=root)))
    except CommandError as exc:
        print(f"users {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


def _password(from_stdin: bool) -> str:
    if from_stdin or not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise CommandError("the two passwords differ")
    return first
