"""What ``setup()`` makes of the environment: OFF when nothing is set, DEAD (with the reason) when
something is set that cannot be used safely."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from core.errors import ToolNotConfiguredError
from tools.auth.config import load_config
from tools.auth.errors import AuthConfigError

GOOD = "g" * 64


def env(**values: str) -> dict[str, str]:
    return dict(values)


def pem(path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, *, private: bool) -> str:
    if private:
        data = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    else:
        data = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    path.write_bytes(data)
    return str(path)


def test_no_key_is_off_and_says_what_to_set() -> None:
    with pytest.raises(ToolNotConfiguredError, match="set AUTH_SECRET_KEY"):
        load_config(env())
    with pytest.raises(ToolNotConfiguredError, match="AUTH_SECRET_KEY"):
        load_config(env(AUTH_SECRET_KEY="   "))


@pytest.mark.parametrize(("algorithm", "needed"), [("HS256", 32), ("HS384", 48), ("HS512", 64)])
def test_a_key_shorter_than_the_algorithm_needs_is_refused(algorithm: str, needed: int) -> None:
    with pytest.raises(AuthConfigError, match=f"is {needed - 1} bytes; {algorithm} needs at least {needed}"):
        load_config(env(AUTH_SECRET_KEY="k" * (needed - 1), AUTH_ALGORITHM=algorithm))
    assert load_config(env(AUTH_SECRET_KEY="k" * needed, AUTH_ALGORITHM=algorithm)).algorithm == algorithm


def test_defaults() -> None:
    config = load_config(env(AUTH_SECRET_KEY=GOOD))
    assert config.algorithm == "HS256"
    assert config.expire.total_seconds() == 3600
    assert config.leeway_seconds == 10
    assert config.issuer is None and config.audience is None
    assert GOOD not in repr(config)


@pytest.mark.parametrize("algorithm", ["none", "None", "HS1", "RS1", "hs256", "EdDSA"])
def test_only_allow_listed_algorithms(algorithm: str) -> None:
    with pytest.raises(AuthConfigError, match="is not allowed; use one of ES256"):
        load_config(env(AUTH_SECRET_KEY=GOOD, AUTH_ALGORITHM=algorithm))


def test_a_public_key_pasted_in_as_the_hmac_secret_is_refused() -> None:
    public = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with pytest.raises(AuthConfigError, match="cannot be used as an HMAC secret"):
        load_config(env(AUTH_SECRET_KEY=public))


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("AUTH_TOKEN_EXPIRE_MINUTES", "0", "between 1 and"),
        ("AUTH_TOKEN_EXPIRE_MINUTES", "soon", "whole number"),
        ("AUTH_LEEWAY_SECONDS", "3600", "between 0 and 300"),
        ("AUTH_SCRYPT_LOG2_N", "30", "between 1 and 24"),
        ("AUTH_HASH_CONCURRENCY", "0", "between 1 and"),
    ],
)
def test_bad_numbers_are_refused_with_the_variable_named(name: str, value: str, message: str) -> None:
    with pytest.raises(AuthConfigError, match=f"{name} must be .*{message}"):
        load_config(env(AUTH_SECRET_KEY=GOOD, **{name: value}))


def test_asymmetric_algorithms_need_key_files(tmp_path: Path) -> None:
    with pytest.raises(ToolNotConfiguredError, match="AUTH_PRIVATE_KEY_FILE"):
        load_config(env(AUTH_ALGORITHM="RS256"))
    with pytest.raises(AuthConfigError, match="AUTH_SECRET_KEY is set but AUTH_ALGORITHM=RS256"):
        load_config(env(AUTH_ALGORITHM="RS256", AUTH_SECRET_KEY=GOOD))
    with pytest.raises(AuthConfigError, match="cannot be read"):
        load_config(env(AUTH_ALGORITHM="RS256", AUTH_PUBLIC_KEY_FILE=str(tmp_path / "missing.pem")))
    (tmp_path / "junk.pem").write_text("not a key")
    with pytest.raises(AuthConfigError, match="not an unencrypted PEM key"):
        load_config(env(AUTH_ALGORITHM="RS256", AUTH_PUBLIC_KEY_FILE=str(tmp_path / "junk.pem")))


def test_weak_or_mismatched_asymmetric_keys_are_refused(tmp_path: Path) -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(AuthConfigError, match="1024 bits; RS256 needs at least 2048"):
        load_config(
            env(AUTH_ALGORITHM="RS256", AUTH_PRIVATE_KEY_FILE=pem(tmp_path / "s.pem", small, private=True))
        )
    p384 = ec.generate_private_key(ec.SECP384R1())
    with pytest.raises(AuthConfigError, match="ES256 needs an EC key on secp256r1"):
        load_config(
            env(AUTH_ALGORITHM="ES256", AUTH_PRIVATE_KEY_FILE=pem(tmp_path / "e.pem", p384, private=True))
        )
    with pytest.raises(AuthConfigError, match="needs an RSA key"):
        load_config(
            env(AUTH_ALGORITHM="RS256", AUTH_PRIVATE_KEY_FILE=pem(tmp_path / "e.pem", p384, private=True))
        )
    one, two = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(AuthConfigError, match="not the same key pair"):
        load_config(
            env(
                AUTH_ALGORITHM="ES256",
                AUTH_PRIVATE_KEY_FILE=pem(tmp_path / "one.pem", one, private=True),
                AUTH_PUBLIC_KEY_FILE=pem(tmp_path / "two.pem", two, private=False),
            )
        )


def test_config_is_read_from_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("AUTH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTH_SECRET_KEY", GOOD)
    monkeypatch.setenv("AUTH_ISSUER", "keel")
    assert load_config().issuer == "keel"
