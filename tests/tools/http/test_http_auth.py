"""auth=False/True/"admin": who may call, and what each refusal looks like."""

from __future__ import annotations

from typing import Any

import pytest

from core.context import bound, current_plugin_var
from core.errors import UnauthorizedError
from tests.tools.http.http_kit import client, make_http
from tools.http.auth import is_admin
from tools.http.http_tool import HttpTool

TOKENS: dict[str, dict[str, Any]] = {
    "user-token": {"sub": "ann", "roles": ["user"]},
    "admin-token": {"sub": "root", "roles": ["user", "admin"]},
    "flag-admin-token": {"sub": "ops", "admin": True},
}


def validator(token: str) -> dict[str, Any]:
    if token not in TOKENS:
        raise UnauthorizedError("token expired")
    return TOKENS[token]


async def whoami(data: dict[str, Any], context: dict[str, Any]) -> Any:
    return {"identity": context["identity"]}


async def secured(monkeypatch: pytest.MonkeyPatch) -> HttpTool:
    http = await make_http(monkeypatch)
    http.add_endpoint("/open", "GET", whoami)
    http.add_endpoint("/user", "GET", whoami, auth=True)
    http.add_endpoint("/admin", "GET", whoami, auth="admin")
    return http


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_without_a_validator_auth_endpoints_are_503_and_admin_ones_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await secured(monkeypatch)
    async with client(http) as c:
        user = await c.get("/user")
        admin = await c.get("/admin")
        open_ = await c.get("/open")
    assert user.status_code == 503
    assert user.json()["error"]["kind"] == "unavailable"
    assert "AUTH_SECRET_KEY" in user.json()["error"]["message"]
    assert (admin.status_code, admin.json()) == (200, {"identity": None})
    assert (open_.status_code, open_.json()) == (200, {"identity": None})


async def test_a_missing_token_is_a_401_with_a_bearer_challenge(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)
    http.set_auth_validator(validator)
    async with client(http) as c:
        for path in ("/user", "/admin"):
            response = await c.get(path)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error"]["kind"] == "unauthorized"
        not_bearer = await c.get("/user", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert not_bearer.status_code == 401


async def test_an_invalid_token_is_a_401_saying_invalid_token(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)
    http.set_auth_validator(validator)
    async with client(http) as c:
        response = await c.get("/user", headers=bearer("forged"))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert response.json()["error"]["message"] == "token expired"


async def test_a_validator_bug_is_a_401_not_an_open_door(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)

    def broken(token: str) -> dict[str, Any]:
        raise RuntimeError("key file missing")

    http.set_auth_validator(broken)
    async with client(http) as c:
        response = await c.get("/user", headers=bearer("user-token"))
    assert response.status_code == 401
    assert "key file" not in response.text


async def test_a_valid_token_puts_the_claims_in_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)

    async def async_validator(token: str) -> dict[str, Any]:
        return validator(token)

    http.set_auth_validator(async_validator)
    async with client(http) as c:
        response = await c.get("/user", headers=bearer("user-token"))
    assert response.json() == {"identity": TOKENS["user-token"]}


async def test_admin_endpoints_need_an_admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)
    http.set_auth_validator(validator)
    async with client(http) as c:
        user = await c.get("/admin", headers=bearer("user-token"))
        admin = await c.get("/admin", headers=bearer("admin-token"))
        flagged = await c.get("/admin", headers=bearer("flag-admin-token"))
    assert user.status_code == 403
    assert user.json()["error"]["kind"] == "forbidden"
    assert admin.json() == {"identity": TOKENS["admin-token"]}
    assert flagged.json() == {"identity": TOKENS["flag-admin-token"]}


async def test_the_admin_rule_can_be_replaced_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)
    http.set_auth_validator(validator)
    http.set_admin_check(lambda claims: claims.get("sub") == "ann")
    async with client(http) as c:
        assert (await c.get("/admin", headers=bearer("user-token"))).status_code == 200
        assert (await c.get("/admin", headers=bearer("admin-token"))).status_code == 403
        http.set_admin_check(None)
        assert (await c.get("/admin", headers=bearer("admin-token"))).status_code == 200


def test_is_admin() -> None:
    assert is_admin({"roles": ["admin"]})
    assert is_admin({"roles": "user, admin"})
    assert is_admin({"admin": True})
    assert not is_admin({"admin": "yes"})
    assert not is_admin({"roles": ["administrator"]})
    assert not is_admin({})


async def test_an_unknown_auth_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    with pytest.raises(ValueError, match="auth must be"):
        http.add_endpoint("/x", "GET", whoami, auth="root")


async def test_releasing_the_owner_removes_its_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await secured(monkeypatch)
    with bound(current_plugin_var, "auth.AuthPlugin"):
        http.set_auth_validator(validator)
    http.release_owner("other.Plugin")
    async with client(http) as c:
        assert (await c.get("/user", headers=bearer("user-token"))).status_code == 200
        http.release_owner("auth.AuthPlugin")
        assert (await c.get("/user", headers=bearer("user-token"))).status_code == 503


async def test_optional_auth_verifies_a_token_that_is_sent_and_lets_anonymous_callers_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/maybe", "GET", whoami, auth="optional")
    async with client(http) as c:
        before = await c.get("/maybe", headers=bearer("user-token"))  # no validator yet: ignored
        http.set_auth_validator(validator)
        anonymous = await c.get("/maybe")
        known = await c.get("/maybe", headers=bearer("user-token"))
        forged = await c.get("/maybe", headers=bearer("forged"))
    assert (before.status_code, before.json()) == (200, {"identity": None})
    assert (anonymous.status_code, anonymous.json()) == (200, {"identity": None})
    assert known.json() == {"identity": TOKENS["user-token"]}
    assert forged.status_code == 401
    assert forged.headers["www-authenticate"] == 'Bearer error="invalid_token"'


async def test_openapi_names_the_bearer_scheme_on_each_operation_that_reads_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await secured(monkeypatch)
    http.add_endpoint("/maybe", "GET", whoami, auth="optional")
    http.set_auth_validator(lambda token: {"sub": "ann"})  # without one, no operation reads a token
    async with client(http) as c:
        schema = (await c.get("/openapi.json")).json()
    scheme = schema["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    security = {path: schema["paths"][path]["get"].get("security") for path in schema["paths"]}
    assert security == {
        "/open": None,
        "/user": [{"bearerAuth": []}],
        "/admin": [{"bearerAuth": []}],
        "/maybe": [{"bearerAuth": []}, {}],
    }
