"""The first admin: ``python main.py users create --admin`` and the ``KEEL_ADMIN`` bootstrap."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import httpx
import pytest

from domains.users.commands import main
from tests.kit import PROJECT, make_root, serving

PASSWORD = "correct-horse-battery"


@pytest.fixture(autouse=True)
def users_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("AUTH_", "LOGIN_", "DATABASE_", "KEEL_ADMIN"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTH_SECRET_KEY", "first-admin-secret-" + "x" * 32)
    monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", "4")
    monkeypatch.setenv("AUTH_SCRYPT_P", "1")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_root(tmp_path, tools=("http", "auth", "db"), domains=("users", "auth_wiring"))
    (root / "migrations").mkdir()
    (root / "migrations" / "users").symlink_to(PROJECT / "migrations" / "users", target_is_directory=True)
    return root


def create(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str, password: str = PASSWORD) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO(password + "\n"))
    return main(["create", *args, "--password-stdin"], root=root)


async def roles_after_login(root: Path, username: str, password: str = PASSWORD) -> list[str]:
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        login = await client.post("/users/login", json={"username": username, "password": password})
        assert login.status_code == 200, login.text
        headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
        me = await client.get("/users/me", headers=headers)
        return list(me.json()["roles"])


def test_users_create_admin_makes_an_account_whose_token_is_an_admins(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert create(root, monkeypatch, "--admin", "Root") == 0
    assert "created root (admin user)" in capsys.readouterr().out
    assert asyncio.run(roles_after_login(root, "root")) == ["admin", "user"]

    assert create(root, monkeypatch, "root") == 1  # taken, and no --admin to promote it
    assert "already taken" in capsys.readouterr().err
    assert create(root, monkeypatch, "ada") == 0
    assert create(root, monkeypatch, "--admin", "ada", password="another-password") == 0
    assert "now an admin (its password is unchanged)" in capsys.readouterr().out
    assert asyncio.run(roles_after_login(root, "ada")) == ["admin", "user"]
    assert create(root, monkeypatch, "bo", password="short") == 1
    assert "username" in capsys.readouterr().err  # "bo" is too short a name, and said so


def test_main_py_users_without_a_command_is_a_usage_error(root: Path) -> None:
    assert main([], root=root) == 2


async def test_keel_admin_creates_the_admin_at_boot_once(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEL_ADMIN", "boss")
    monkeypatch.setenv("KEEL_ADMIN_PASSWORD", PASSWORD)
    assert await roles_after_login(root, "boss") == ["admin", "user"]
    monkeypatch.setenv("KEEL_ADMIN_PASSWORD", "a-changed-password")
    assert await roles_after_login(root, "boss") == ["admin", "user"]  # the old password still works


async def test_keel_admin_without_a_password_is_a_dead_plugin_saying_so(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEL_ADMIN", "boss")
    async with serving(root) as (kernel, _):
        plugin = kernel.registry.get_system_dump()["plugins"]["users.BootstrapAdmin"]
    assert plugin["status"] == "DEAD"
    assert "KEEL_ADMIN_PASSWORD" in plugin["error"]
