"""``python main.py users create [--admin] NAME``: make an account from the command line.

This is how the first admin comes to exist: registering over HTTP only ever gives the ``user``
role. The command boots the project's tools only (which applies migrations, like ``main.py
migrate``), creates the account with :func:`domains.users.accounts.create_account`, and stops. The
password is read from standard input with ``--password-stdin`` (for scripts), else asked for twice
on the terminal; it is never taken from the command line, where ``ps`` would show it. ``--admin``
on a name that already exists grants that account the admin role instead (its password is kept).

:func:`create_user` is the callable part, for a fuller command-line tool to reuse. Exit codes: 0
done, 1 refused (a taken name, a bad password, a tool that cannot start), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core import ConflictError, Kernel
from domains.users.accounts import ADMIN_ROLES, USER_ROLES, create_account, grant_admin
from domains.users.models.user import RegisterRequest


class CommandError(Exception):
    """The command was refused; the message says why."""


async def create_user(
    username: str, password: str | None, *, admin: bool = False, root: Path | None = None
) -> str:
    """Create the account (or, with ``admin``, promote an existing one); a line saying what was done."""
    kernel = Kernel(root)
    await kernel.boot(plugins=False)
    try:
        tools = kernel.registry.get_system_dump()["tools"]
        for name in ("db", "auth"):
            status = tools.get(name, {}).get("status")
            if status != "OK":
                message = tools.get(name, {}).get("message") or "not found"
                raise CommandError(f"the {name} tool is {status or 'missing'}: {message}")
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


def main(argv: list[str], *, root: Path | None = None) -> int:
    parser = argparse.ArgumentParser(prog="main.py users", description="Manage user accounts.")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create an account (the first admin, say)")
    create.add_argument("username")
    create.add_argument("--admin", action="store_true", help="give it the admin role")
    create.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        password = _password(args.password_stdin)
        print(asyncio.run(create_user(args.username, password, admin=args.admin, root=root)))
    except CommandError as exc:
        print(f"users create: {exc}", file=sys.stderr)
        return 1
    return 0


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise CommandError("the two passwords differ")
    return first
