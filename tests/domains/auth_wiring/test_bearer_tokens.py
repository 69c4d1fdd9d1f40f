"""Bearer tokens through a served kernel: the attack battery against a protected endpoint, and what
clients see when ``auth`` is OFF or DEAD while the rest of the service keeps serving."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from core import Kernel
from tests.kit import make_root, serving, write
from tests.tools.auth.forge import BATTERY, SECRET, Attack, claims, hmac_token

DEMO_PLUGIN = """
    from core import BasePlugin

    class Demo(BasePlugin):
        def __init__(self, http):
            self.http = http

        async def on_boot(self):
            self.http.add_endpoint("/open", "GET", self.open)
            self.http.add_endpoint("/private", "GET", self.private, auth=True)
            self.http.add_endpoint("/admin", "GET", self.private, auth="admin")

        async def open(self, data, context):
            return {"ok": True}

        async def private(self, data, context):
            return {"sub": context["identity"]["sub"], "roles": context["identity"].get("roles", [])}
"""


def project(tmp_path: Path) -> Path:
    root = make_root(tmp_path, tools=("http", "auth"), domains=("auth_wiring",))
    write(root, "domains/demo/plugins/demo.py", DEMO_PLUGIN)
    return root


@pytest.fixture(autouse=True)
def auth_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("AUTH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", "4")


@pytest.fixture
async def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Kernel, httpx.AsyncClient]]:
    monkeypatch.setenv("AUTH_SECRET_KEY", SECRET)
    async with (
        serving(project(tmp_path)) as (kernel, base_url),
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        yield kernel, client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("attack", BATTERY, ids=[attack.case for attack in BATTERY])
async def test_the_protected_endpoint_refuses_every_hostile_token(
    served: tuple[Kernel, httpx.AsyncClient], attack: Attack
) -> None:
    _, client = served
    response = await client.get("/private", headers=bearer(attack.forge()))
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    error = response.json()["error"]
    assert error["kind"] == "unauthorized"
    assert "token" in error["message"] and SECRET not in response.text


async def test_a_valid_token_reaches_the_handler_with_its_identity(
    served: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = served
    token = kernel.container.get("auth").create_token("user-9", {"roles": ["user"]})
    response = await client.get("/private", headers=bearer(token))
    assert response.status_code == 200
    assert response.json() == {"sub": "user-9", "roles": ["user"]}
    assert (await client.get("/admin", headers=bearer(token))).status_code == 403
    admin = kernel.container.get("auth").create_token("root", {"roles": ["admin"]})
    assert (await client.get("/admin", headers=bearer(admin))).json()["sub"] == "root"


async def test_missing_or_non_bearer_credentials_are_challenged(
    served: tuple[Kernel, httpx.AsyncClient],
) -> None:
    _, client = served
    for headers in ({}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer"}):
        response = await client.get("/private", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    assert (await client.get("/open")).json() == {"ok": True}


async def test_a_flood_of_bad_tokens_does_not_take_auth_down(
    served: tuple[Kernel, httpx.AsyncClient],
) -> None:
    kernel, client = served
    for _ in range(12):
        assert (
            await client.get("/private", headers=bearer(hmac_token(claims(), key="x" * 40)))
        ).status_code == 401
    assert kernel.registry.tool_status("auth") == "OK"
    token = kernel.container.get("auth").create_token("still-works")
    assert (await client.get("/private", headers=bearer(token))).status_code == 200


async def test_without_a_key_only_auth_is_off_and_protected_endpoints_say_so(tmp_path: Path) -> None:
    async with (
        serving(project(tmp_path)) as (kernel, base_url),
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        dump = kernel.registry.get_system_dump()
        assert dump["tools"]["auth"]["status"] == "OFF"
        assert "set AUTH_SECRET_KEY" in dump["tools"]["auth"]["message"]
        assert dump["tools"]["http"]["status"] == "OK"
        assert {p["status"] for p in dump["plugins"].values()} == {"READY"}
        assert (await client.get("/open")).status_code == 200
        response = await client.get("/private", headers=bearer(hmac_token(claims())))
        assert response.status_code == 503
        assert "not configured" in response.json()["error"]["message"]


async def test_a_short_key_makes_only_auth_dead_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTH_SECRET_KEY", "too-short")
    async with (
        serving(project(tmp_path)) as (kernel, base_url),
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        dump = kernel.registry.get_system_dump()
        assert dump["tools"]["auth"]["status"] == "DEAD"
        assert "AUTH_SECRET_KEY is 9 bytes; HS256 needs at least 32" in dump["tools"]["auth"]["message"]
        assert dump["tools"]["http"]["status"] == "OK"
        assert {p["status"] for p in dump["plugins"].values()} == {"READY"}
        assert (await client.get("/open")).status_code == 200
        assert (await client.get("/private", headers=bearer(hmac_token(claims())))).status_code == 503
