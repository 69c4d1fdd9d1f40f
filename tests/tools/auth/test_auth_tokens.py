"""The JWT attack battery against ``verify_token``, plus issuing, claims and the typed refusals.

Every refusal must be a ``TokenError`` with the right ``reason``, never another exception: the
tokens come from an attacker, so nothing in them may crash the verifier.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from core.errors import ServiceUnavailableError, UnauthorizedError
from tests.tools.auth.forge import BATTERY, SECRET, Attack, claims, damage_signature, hmac_token
from tools.auth.auth_tool import AuthTool
from tools.auth.errors import TokenError, TokenErrorReason

Reason = TokenErrorReason


def clear_auth_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in [n for n in os.environ if n.startswith("AUTH_")]:
        monkeypatch.delenv(name)


async def make_auth(monkeypatch: pytest.MonkeyPatch, **env: str) -> AuthTool:
    clear_auth_env(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tool = AuthTool()
    await tool.setup()
    return tool


@pytest.fixture
async def auth(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[AuthTool]:
    yield await make_auth(monkeypatch, AUTH_SECRET_KEY=SECRET)


def refusal(auth: AuthTool, token: str) -> Reason:
    with pytest.raises(TokenError) as caught:
        auth.verify_token(token)
    check = auth.check_token(token)
    assert not check.ok and check.claims is None and check.error is not None
    assert check.error.reason is caught.value.reason
    return caught.value.reason


# -- the battery: one hostile token per case, each with the reason it must be refused for ----------


@pytest.mark.parametrize("attack", BATTERY, ids=[attack.case for attack in BATTERY])
async def test_verify_token_refuses_hostile_tokens(auth: AuthTool, attack: Attack) -> None:
    assert refusal(auth, attack.forge()) is Reason(attack.reason)


async def test_non_string_and_empty_tokens_are_malformed(auth: AuthTool) -> None:
    assert refusal(auth, "") is Reason.MALFORMED
    assert refusal(auth, "\x00\xff\x10.\x00.\x00") is Reason.MALFORMED
    assert refusal(auth, None) is Reason.MALFORMED  # type: ignore[arg-type]


async def test_a_pem_public_key_used_as_the_hmac_secret_is_refused(auth: AuthTool) -> None:
    public_pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert refusal(auth, hmac_token(claims(), key=public_pem)) is Reason.BAD_SIGNATURE


async def test_bytes_tokens_are_read_and_non_ascii_bytes_refused(auth: AuthTool) -> None:
    token = auth.create_token("user-1")
    assert auth.verify_token(token.encode("ascii"))["sub"] == "user-1"  # type: ignore[arg-type]
    assert refusal(auth, b"\xff\xfe".decode("latin-1")) is Reason.MALFORMED


# -- what valid tokens carry ------------------------------------------------------------------------


async def test_a_created_token_verifies_with_its_claims(auth: AuthTool) -> None:
    token = auth.create_token("user-7", {"roles": ["admin"], "username": "ada"})
    verified = auth.verify_token(token)
    assert verified["sub"] == "user-7"
    assert verified["roles"] == ["admin"] and verified["username"] == "ada"
    assert verified["exp"] - verified["iat"] == 3600
    assert len(verified["jti"]) == 32
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    check = auth.check_token(token)
    assert check.ok and check.claims == verified


async def test_expires_delta_overrides_the_configured_lifetime(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = await make_auth(monkeypatch, AUTH_SECRET_KEY=SECRET, AUTH_TOKEN_EXPIRE_MINUTES="5")
    default = auth.verify_token(auth.create_token("u"))
    custom = auth.verify_token(auth.create_token("u", expires_delta=timedelta(seconds=30)))
    assert default["exp"] - default["iat"] == 300
    assert custom["exp"] - custom["iat"] == 30


async def test_leeway_tolerates_small_clock_skew_only(auth: AuthTool) -> None:
    now = int(time.time())
    assert auth.verify_token(hmac_token(claims(exp=now - 3)))["sub"] == "user-1"
    assert auth.verify_token(hmac_token(claims(iat=now + 3)))["sub"] == "user-1"
    assert refusal(auth, hmac_token(claims(exp=now - 30))) is Reason.EXPIRED


async def test_issuer_and_audience_are_set_and_required(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = await make_auth(monkeypatch, AUTH_SECRET_KEY=SECRET, AUTH_ISSUER="keel", AUTH_AUDIENCE="api")
    verified = auth.verify_token(auth.create_token("u"))
    assert (verified["iss"], verified["aud"]) == ("keel", "api")
    assert refusal(auth, hmac_token(claims(iss="evil", aud="api"))) is Reason.WRONG_ISSUER
    assert refusal(auth, hmac_token(claims(iss="keel", aud="other"))) is Reason.WRONG_AUDIENCE
    assert refusal(auth, hmac_token(claims(aud="api"))) is Reason.MISSING_CLAIM
    assert refusal(auth, hmac_token(claims(iss="keel"))) is Reason.MISSING_CLAIM


async def test_a_token_with_an_audience_is_refused_where_none_is_configured(auth: AuthTool) -> None:
    assert refusal(auth, hmac_token(claims(aud="someone-else"))) is Reason.WRONG_AUDIENCE


async def test_hs384_and_hs512_deployments_pin_their_own_algorithm(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = await make_auth(monkeypatch, AUTH_SECRET_KEY=SECRET, AUTH_ALGORITHM="HS512")
    assert jwt.get_unverified_header(auth.create_token("u"))["alg"] == "HS512"
    assert auth.verify_token(hmac_token(claims(), alg="HS512"))["sub"] == "user-1"
    assert refusal(auth, hmac_token(claims(), alg="HS256")) is Reason.ALGORITHM_NOT_ALLOWED


async def test_token_errors_are_401s_with_a_reason_and_a_safe_message(auth: AuthTool) -> None:
    with pytest.raises(TokenError) as caught:
        auth.verify_token(hmac_token(claims(exp=int(time.time()) - 120)))
    error = caught.value
    assert isinstance(error, UnauthorizedError) and error.status_code == 401
    assert str(error) == "token has expired"
    assert SECRET not in repr(error)


async def test_registered_claims_cannot_be_smuggled_in(auth: AuthTool) -> None:
    with pytest.raises(ValueError, match="registered claims"):
        auth.create_token("u", {"exp": 0})
    with pytest.raises(ValueError, match="non-empty"):
        auth.create_token("")
    with pytest.raises(ValueError, match="positive"):
        auth.create_token("u", expires_delta=timedelta(0))


async def test_an_unconfigured_tool_answers_503(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_auth_env(monkeypatch)
    tool = AuthTool()
    assert not tool.configured
    with pytest.raises(ServiceUnavailableError, match="not configured"):
        tool.verify_token("x")
    with pytest.raises(ServiceUnavailableError):
        tool.hash_password("x")


# -- asymmetric deployments: the algorithm-confusion attack ---------------------------------------


def write_pem(path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    private = path / "private.pem"
    public = path / "public.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


async def test_rs256_refuses_its_public_key_used_as_an_hmac_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    private, public = write_pem(tmp_path, rsa_key)
    auth = await make_auth(
        monkeypatch,
        AUTH_ALGORITHM="RS256",
        AUTH_PRIVATE_KEY_FILE=str(private),
        AUTH_PUBLIC_KEY_FILE=str(public),
    )
    assert auth.verify_token(auth.create_token("u"))["sub"] == "u"
    assert refusal(auth, hmac_token(claims(), key=public.read_bytes())) is Reason.ALGORITHM_NOT_ALLOWED
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims(), other, algorithm="RS256")
    assert refusal(auth, forged) is Reason.BAD_SIGNATURE


async def test_a_verify_only_deployment_verifies_but_cannot_issue(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    _, public = write_pem(tmp_path, rsa_key)
    auth = await make_auth(monkeypatch, AUTH_ALGORITHM="RS256", AUTH_PUBLIC_KEY_FILE=str(public))
    assert auth.verify_token(jwt.encode(claims(), rsa_key, algorithm="RS256"))["sub"] == "user-1"
    with pytest.raises(ServiceUnavailableError, match="only verifies"):
        auth.create_token("u")


async def test_es256_signs_and_verifies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    private, _ = write_pem(tmp_path, ec.generate_private_key(ec.SECP256R1()))
    auth = await make_auth(monkeypatch, AUTH_ALGORITHM="ES256", AUTH_PRIVATE_KEY_FILE=str(private))
    token = auth.create_token("u")
    assert jwt.get_unverified_header(token)["alg"] == "ES256"
    assert auth.verify_token(token)["sub"] == "u"
    assert refusal(auth, hmac_token(claims(), alg="HS256")) is Reason.ALGORITHM_NOT_ALLOWED


# -- remembered tokens ------------------------------------------------------------------------------


async def test_a_remembered_token_is_still_refused_once_it_expires(
    auth: AuthTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime as real_datetime

    import jwt.api_jwt

    token = auth.create_token("user-1", expires_delta=timedelta(minutes=5))
    assert auth.verify_token(token)["sub"] == "user-1"
    assert auth.verify_token(token)["sub"] == "user-1"  # now answered from memory
    later = time.time() + 3600

    class Later(real_datetime.datetime):
        @classmethod
        def now(cls, tz: real_datetime.tzinfo | None = None) -> Later:
            return cls.fromtimestamp(later, tz)

    monkeypatch.setattr("tools.auth.tokens.time.time", lambda: later)
    monkeypatch.setattr(jwt.api_jwt, "datetime", Later)
    assert refusal(auth, token) is Reason.EXPIRED


async def test_remembered_claims_are_a_fresh_copy_each_time(auth: AuthTool) -> None:
    token = auth.create_token("user-1", {"roles": ["user"]})
    first = auth.verify_token(token)
    first["roles"].append("admin")
    first["sub"] = "someone-else"
    assert auth.verify_token(token)["roles"] == ["user"]
    assert auth.verify_token(token)["sub"] == "user-1"


async def test_refused_tokens_are_never_remembered(auth: AuthTool) -> None:
    forged = hmac_token(claims(), key="x" * 40)
    for _ in range(3):
        assert refusal(auth, forged) is Reason.BAD_SIGNATURE
    tampered = damage_signature(hmac_token(claims()))  # always differs (it could once equal the token)
    assert auth.verify_token(hmac_token(claims()))["sub"] == "user-1"
    assert refusal(auth, tampered) is Reason.BAD_SIGNATURE
