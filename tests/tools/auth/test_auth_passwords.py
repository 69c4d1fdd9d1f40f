"""Password hashing: round trip, wrong passwords, the self-describing format and the upgrade path."""

from __future__ import annotations

import asyncio
import os

import pytest

from tools.auth.auth_tool import AuthTool
from tools.auth.errors import AuthConfigError, PasswordHashError
from tools.auth.passwords import ScryptParams, hash_password, needs_rehash, parse_hash, verify_password

FAST = ScryptParams(log2_n=4, r=8, p=1)


async def make_auth(monkeypatch: pytest.MonkeyPatch, log2_n: int = 4, p: int = 1) -> AuthTool:
    for name in [n for n in os.environ if n.startswith("AUTH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTH_SECRET_KEY", "s" * 32)
    monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", str(log2_n))
    monkeypatch.setenv("AUTH_SCRYPT_P", str(p))
    tool = AuthTool()
    await tool.setup()
    return tool


def test_round_trip_and_wrong_password() -> None:
    encoded = hash_password("correct horse battery staple", FAST)
    assert verify_password("correct horse battery staple", encoded)
    assert not verify_password("correct horse battery stapler", encoded)
    assert not verify_password("", encoded)


def test_each_hash_is_salted() -> None:
    first, second = hash_password("same", FAST), hash_password("same", FAST)
    assert first != second
    assert verify_password("same", first) and verify_password("same", second)


def test_the_hash_describes_its_parameters_and_salt() -> None:
    encoded = hash_password("pw", ScryptParams(log2_n=5, r=4, p=2))
    assert encoded.startswith("$scrypt$ln=5,r=4,p=2$")
    params, salt, digest = parse_hash(encoded)
    assert params == ScryptParams(5, 4, 2)
    assert len(salt) == 16 and len(digest) == 32
    assert "pw" not in encoded


def test_unicode_forms_of_one_password_match() -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert verify_password(decomposed, hash_password(composed, FAST))


def test_needs_rehash_when_the_parameters_change() -> None:
    old = hash_password("pw", FAST)
    assert not needs_rehash(old, FAST)
    assert needs_rehash(old, ScryptParams(log2_n=5, r=8, p=1))
    assert needs_rehash("$2b$12$something-from-bcrypt", FAST)


@pytest.mark.parametrize(
    "stored",
    ["", "plain text", "$scrypt$ln=4,r=8,p=1$bad!salt$AAAA", "$scrypt$ln=99,r=8,p=1$AAAAAAAA$" + "A" * 43],
)
def test_an_unreadable_hash_raises_instead_of_failing_the_password(stored: str) -> None:
    with pytest.raises(PasswordHashError):
        verify_password("pw", stored)


def test_parameters_outside_the_bounds_are_refused() -> None:
    with pytest.raises(AuthConfigError, match="out of range"):
        ScryptParams(log2_n=0)
    with pytest.raises(AuthConfigError, match="MiB"):
        ScryptParams(log2_n=24, r=64)


async def test_the_tool_hashes_with_its_configured_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = await make_auth(monkeypatch, log2_n=5)
    encoded = auth.hash_password("hunter2hunter2")
    assert encoded.startswith("$scrypt$ln=5,r=8,p=1$")
    assert auth.verify_password("hunter2hunter2", encoded)
    assert not auth.verify_password("hunter3hunter3", encoded)
    assert not auth.needs_rehash(encoded)


async def test_raising_the_cost_flags_old_hashes_for_rehash(monkeypatch: pytest.MonkeyPatch) -> None:
    old = (await make_auth(monkeypatch, log2_n=4)).hash_password("pw")
    upgraded = await make_auth(monkeypatch, log2_n=6)
    assert upgraded.verify_password("pw", old), "old hashes keep verifying after an upgrade"
    assert upgraded.needs_rehash(old)
    assert not upgraded.needs_rehash(upgraded.hash_password("pw"))


async def test_async_twins_run_concurrently_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = await make_auth(monkeypatch)
    hashes = await asyncio.gather(*(auth.ahash_password(f"pw-{i}") for i in range(4)))
    verdicts = await asyncio.gather(*(auth.averify_password(f"pw-{i}", h) for i, h in enumerate(hashes)))
    assert verdicts == [True, True, True, True]
    assert not await auth.averify_password("pw-0", hashes[1])


def test_the_default_cost_is_an_owasp_scrypt_setting() -> None:
    default = ScryptParams()
    assert (1 << default.log2_n, default.r, default.p) == (2**15, 8, 3)
    assert default.memory_bytes >= 32 * 1024 * 1024
