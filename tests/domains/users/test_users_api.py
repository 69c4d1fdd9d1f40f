"""The users domain over HTTP on a served kernel: register, login, who-am-I, and the login limits."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import Kernel
from domains.users.plugins.login import pair_key
from tests.kit import PROJECT, make_root, serving, until, write

PASSWORD = "correct-horse-battery"

RECORDING_BUS = """
    from core import BaseTool

    class RecordingBus(BaseTool):
        name = "event_bus"

        def __init__(self):
            self.published = []

        async def publish(self, name, payload):
            self.published.append((name, payload))
"""


def project(tmp_path: Path) -> Path:
    root = make_root(tmp_path, tools=("http", "auth", "db"), domains=("users", "auth_wiring"))
    (root / "migrations").mkdir()
    (root / "migrations" / "users").symlink_to(PROJECT / "migrations" / "users", target_is_directory=True)
    write(root, "tools/recording_bus/recording_bus.py", RECORDING_BUS)
    return root


@pytest.fixture(autouse=True)
def users_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("AUTH_", "LOGIN_", "DATABASE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTH_SECRET_KEY", "users-test-secret-" + "x" * 32)
    monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", "4")
    monkeypatch.setenv("AUTH_SCRYPT_P", "1")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return project(tmp_path)


@pytest.fixture
async def service(root: Path) -> AsyncIterator[tuple[Kernel, httpx.AsyncClient]]:
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        yield kernel, client


async def register(client: httpx.AsyncClient, username: str, password: str = PASSWORD) -> httpx.Response:
    return await client.post("/users/register", json={"username": username, "password": password})


async def login(client: httpx.AsyncClient, username: str, password: str = PASSWORD) -> httpx.Response:
    return await client.post("/users/login", json={"username": username, "password": password})


def bearer(response: httpx.Response) -> dict[str, str]:
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


async def test_register_login_and_who_am_i(
    service: tuple[Kernel, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    kernel, client = service
    caplog.set_level(logging.DEBUG)
    created = await register(client, "Ada")
    assert created.status_code == 201, created.text
    account = created.json()
    assert account["username"] == "ada" and account["roles"] == ["user"]
    assert set(account) == {"id", "username", "roles", "created_at"}

    token = await login(client, "ADA")
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["token_type"] == "bearer" and body["expires_in"] == 3600

    me = await client.get("/users/me", headers=bearer(token))
    assert me.status_code == 200
    assert me.json() == account
    claims = kernel.container.get("auth").verify_token(body["access_token"])
    assert (claims["sub"], claims["username"], claims["roles"]) == (account["id"], "ada", ["user"])

    stored = await kernel.container.get("db").query_one("SELECT * FROM users WHERE username = $1", ["ada"])
    assert stored["password_hash"].startswith("$scrypt$")
    assert PASSWORD not in str(stored)
    assert all(PASSWORD not in record.getMessage() for record in caplog.records)
    assert kernel.container.get("event_bus").published == [
        ("user.registered", {"id": account["id"], "username": "ada"})
    ]


async def test_who_am_i_needs_a_token(service: tuple[Kernel, httpx.AsyncClient]) -> None:
    _, client = service
    response = await client.get("/users/me")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    forged = await client.get("/users/me", headers={"Authorization": "Bearer a.b.c"})
    assert forged.status_code == 401


async def test_duplicate_usernames_conflict_whatever_their_case(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    _, client = service
    assert (await register(client, "grace")).status_code == 201
    duplicate = await register(client, "Grace", "another-password")
    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["kind"] == "conflict"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"username": "ok-name", "password": "Zq9!x"}, "password"),
        ({"username": "no spaces allowed", "password": PASSWORD}, "username"),
        ({"username": "x", "password": PASSWORD}, "username"),
        ({"username": "ok-name"}, "password"),
        ({"username": "ok-name", "password": PASSWORD, "roles": "admin"}, "roles"),
    ],
)
async def test_registration_input_is_validated_without_echoing_it(
    service: tuple[Kernel, httpx.AsyncClient], body: dict[str, str], field: str
) -> None:
    _, client = service
    response = await client.post("/users/register", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert field in [f["field"] for f in error["fields"]]
    assert body.get("password", "<absent>") not in response.text


async def test_wrong_password_and_unknown_user_look_the_same(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    _, client = service
    await register(client, "linus")
    wrong = await login(client, "linus", "not-the-password")
    unknown = await login(client, "nobody-here", "not-the-password")
    assert wrong.status_code == unknown.status_code == 401
    assert (
        wrong.json()["error"]["message"]
        == unknown.json()["error"]["message"]
        == "invalid username or password"
    )


async def test_five_failures_from_one_address_back_that_pair_off_even_for_the_right_password(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    _, client = service
    await register(client, "barbara")
    for _ in range(5):
        assert (await login(client, "barbara", "guess-guess")).status_code == 401
    locked = await login(client, "barbara")
    assert locked.status_code == 429
    assert 1 <= int(locked.headers["retry-after"]) <= 60  # LOGIN_BACKOFF_SECONDS after the fifth
    assert "too many failed logins" in locked.json()["error"]["message"]
    assert locked.json()["error"]["kind"] == "rate_limited"
    assert (await register(client, "other-user")).status_code == 201
    assert (await login(client, "other-user")).status_code == 200, "another account is not locked"


async def test_the_backoff_doubles_with_each_failure_past_the_free_ones(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGIN_MAX_FAILURES", "2")
    monkeypatch.setenv("LOGIN_BACKOFF_SECONDS", "0.2")
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        await register(client, "grace")
        for _ in range(2):
            assert (await login(client, "grace", "wrong-wrong")).status_code == 401
        assert (await login(client, "grace")).status_code == 429
        plugin: Any = kernel.plugins["users.LoginUser"].instance
        pair = pair_key("grace", "127.0.0.1")
        await until(lambda: plugin.pairs.retry_after(pair) is None, "the first wait (0.2 s) ends")
        assert (await login(client, "grace", "wrong-wrong")).status_code == 401
        wait = plugin.pairs.retry_after(pair)
        assert wait is not None and 0.2 < wait <= 0.4  # doubled
        await until(lambda: plugin.pairs.retry_after(pair) is None, "the second wait (0.4 s) ends")
        assert (await login(client, "grace")).status_code == 200
        assert plugin.pairs.retry_after(pair) is None


async def test_an_attacker_cannot_lock_a_victim_out(root: Path) -> None:
    attacker_transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with (
        serving(root) as (_, base_url),
        httpx.AsyncClient(base_url=base_url) as victim,
        httpx.AsyncClient(base_url=base_url, transport=attacker_transport) as attacker,
    ):
        await register(victim, "victoria")
        answers = [(await login(attacker, "victoria", f"guess-{n}-guess")).status_code for n in range(12)]
        assert answers[:5] == [401] * 5
        assert set(answers[5:]) == {429}, "the attacker's own guesses are held back"
        forged = {"X-Forwarded-For": "127.0.0.1"}  # pretending to be the victim's address does not help
        response = await attacker.post(
            "/users/login", json={"username": "victoria", "password": "guess-guess"}, headers=forged
        )
        assert response.status_code == 429
        assert (await login(victim, "victoria")).status_code == 200, "the victim still logs in"
        assert (await login(victim, "victoria", "one-typo-here")).status_code == 401
        assert (await login(victim, "victoria")).status_code == 200


async def test_one_address_is_limited_across_accounts(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGIN_MAX_FAILURES_PER_ADDRESS", "3")
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        await register(client, "margaret")
        for name in ("a1", "a2", "a3"):
            assert (await login(client, name, "whatever-1")).status_code == 401
        blocked = await login(client, "margaret")
        assert blocked.status_code == 429
        assert int(blocked.headers["retry-after"]) > 0


async def test_a_successful_login_clears_the_account_failures(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    _, client = service
    await register(client, "alan")
    for _ in range(4):
        await login(client, "alan", "nope-nope")
    assert (await login(client, "alan")).status_code == 200
    for _ in range(4):
        assert (await login(client, "alan", "nope-nope")).status_code == 401
    assert (await login(client, "alan")).status_code == 200


async def test_login_upgrades_a_hash_made_with_older_parameters(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        assert (await register(client, "edsger")).status_code == 201
    monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", "5")
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        db = kernel.container.get("db")
        before = await db.scalar("SELECT password_hash FROM users WHERE username = $1", ["edsger"])
        assert before.startswith("$scrypt$ln=4,")
        assert (await login(client, "edsger")).status_code == 200
        after = await db.scalar("SELECT password_hash FROM users WHERE username = $1", ["edsger"])
        assert after.startswith("$scrypt$ln=5,")
        assert (await login(client, "edsger")).status_code == 200


async def test_a_deleted_account_is_not_found_with_its_old_token(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = service
    await register(client, "ken")
    token = await login(client, "ken")
    await kernel.container.get("db").execute("DELETE FROM users WHERE username = $1", ["ken"])
    response = await client.get("/users/me", headers=bearer(token))
    assert response.status_code == 404


async def test_server_failures_do_not_count_against_the_caller(
    service: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = service
    await kernel.container.get("db").execute("DROP TABLE users")
    for _ in range(6):
        assert (await login(client, "anyone")).status_code == 500
    plugin: Any = kernel.plugins["users.LoginUser"].instance
    assert plugin.pairs.retry_after(pair_key("anyone", "127.0.0.1")) is None
    assert plugin.addresses.retry_after("127.0.0.1") is None
