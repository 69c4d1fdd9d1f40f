"""``keel users create [--admin] NAME`` and ``keel users token NAME`` in a temporary project, as a
subprocess: the first admin is made from the command line (its password on standard input, a pipe),
its token opens an admin-only endpoint of the running service (the dashboard's data,
``GET /system/dashboard/info``, ``auth="admin"``) while no token is a 401 and a plain user's a 403;
an unknown account, a taken name, a short password and a missing secret are refused with a clear
message and exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.core.cli.cli_kit import environment, keel_run
from tests.kit import PROJECT, make_root

SECRET = "k" * 40  # AUTH_SECRET_KEY: HS256 wants at least 32 bytes
ADMIN_ONLY = "/system/dashboard/info"


def project(tmp_path: Path) -> Path:
    """The users, dashboard and bearer-token domains on the logger, http, db and auth tools, with the
    users migration."""
    root = make_root(
        tmp_path, tools=("logger", "http", "db", "auth"), domains=("users", "dashboard", "auth_wiring")
    )
    (root / "migrations").mkdir()
    (root / "migrations" / "users").symlink_to(PROJECT / "migrations" / "users", target_is_directory=True)
    return root


def users(root: Path, *arguments: str, stdin: str = "", **settings: str) -> subprocess.CompletedProcess[str]:
    """``keel users ARGUMENTS`` with ``stdin`` piped in (so a password is read from it)."""
    return subprocess.run(
        [sys.executable, "-m", "core.cli", "--root", str(root), "users", *arguments],
        cwd=PROJECT,
        env=environment(**{"AUTH_SECRET_KEY": SECRET, **settings}),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def last_line(text: str) -> str:
    """The command's own message: boot's log lines come first on standard error."""
    return text.rstrip("\n").rsplit("\n", 1)[-1]


async def test_an_admin_made_from_the_command_line_opens_an_admin_endpoint(tmp_path: Path) -> None:
    root = project(tmp_path)
    created = users(root, "create", "--admin", "Root", stdin="correct horse battery\n")
    assert created.returncode == 0, created.stdout + created.stderr
    assert created.stdout.startswith("created root (admin user), id "), created.stdout
    token = users(root, "token", "root")
    assert token.returncode == 0, token.stderr
    admin_token = token.stdout.strip()
    assert token.stdout == admin_token + "\n" and admin_token.count(".") == 2  # one line: a JWT
    plain = users(root, "create", "ada", "--password", "another long one")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("created ada (user), id ")
    user_token = users(root, "token", "ada").stdout.strip()

    async with keel_run(root, tmp_path / "run.log", AUTH_SECRET_KEY=SECRET) as running:
        async with httpx.AsyncClient(base_url=running.url) as client:
            with_admin = await client.get(ADMIN_ONLY, headers={"Authorization": f"Bearer {admin_token}"})
            without = await client.get(ADMIN_ONLY)
            with_user = await client.get(ADMIN_ONLY, headers={"Authorization": f"Bearer {user_token}"})
            me = await client.get("/users/me", headers={"Authorization": f"Bearer {admin_token}"})
            login = await client.post(
                "/users/login", json={"username": "root", "password": "correct horse battery"}
            )
    assert with_admin.status_code == 200, with_admin.text
    assert without.status_code == 401, without.text
    assert with_user.status_code == 403, with_user.text
    assert me.status_code == 200 and me.json()["username"] == "root", me.text
    assert login.status_code == 200, login.text  # the password read from stdin is the account's


def test_a_token_for_an_unknown_account_is_refused(tmp_path: Path) -> None:
    token = users(project(tmp_path), "token", "nobody")
    assert token.returncode == 1
    assert token.stdout == ""
    assert last_line(token.stderr) == (
        "users token: there is no account 'nobody'; create it with `keel users create`"
    )
    assert "Traceback" not in token.stderr


def test_a_taken_name_and_a_short_password_are_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert users(root, "create", "ada", stdin="long enough password\n").returncode == 0
    taken = users(root, "create", "ada", stdin="some other password\n")
    assert taken.returncode == 1 and taken.stdout == ""
    assert last_line(taken.stderr).startswith("users create: "), taken.stderr
    assert "ada" in last_line(taken.stderr)
    short = users(root, "create", "bob", stdin="short\n")
    assert short.returncode == 1
    assert last_line(short.stderr) == "users create: password: String should have at least 8 characters"
    assert users(root, "token", "bob").returncode == 1  # nothing was created


def test_admin_on_an_existing_account_promotes_it_and_keeps_its_password(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert users(root, "create", "ada", stdin="long enough password\n").returncode == 0
    promoted = users(root, "create", "--admin", "ada", stdin="ignored password\n")
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stdout == "ada already exists and is now an admin (its password is unchanged)\n"


def test_without_a_secret_the_auth_tool_is_named_as_the_reason(tmp_path: Path) -> None:
    refused = users(
        project(tmp_path), "create", "--admin", "root", stdin="correct horse battery\n", AUTH_SECRET_KEY=""
    )
    assert refused.returncode == 1
    assert last_line(refused.stderr).startswith("users create: the auth tool is OFF: "), refused.stderr
    assert "AUTH_SECRET_KEY" in last_line(refused.stderr)
