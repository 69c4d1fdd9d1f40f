"""The ``auth`` tool's configuration, read from the environment and checked before any token exists.

Two outcomes besides a usable configuration, because they mean different things to an operator:

* nothing set (no ``AUTH_SECRET_KEY`` for HMAC, no key file for RSA/EC) is a deliberate choice:
  :class:`~core.errors.ToolNotConfiguredError`, the tool is OFF and the message says what to set;
* something set but unusable (a key shorter than the algorithm needs, an algorithm outside the
  allow-list, a public key pasted in as an HMAC secret, an RSA key under 2048 bits) is a mistake:
  :class:`~tools.auth.errors.AuthConfigError`, the tool is DEAD with the reason.

The allow-list is fixed here, not derived from any token: HS256/384/512 with a shared secret of at
least 32/48/64 bytes (the digest size, per RFC 7518 §3.2), and RS*/PS*/ES* with PEM key files. A
deployment verifies with exactly one algorithm, so a token can never choose how it is checked.
Setting ``AUTH_SECRET_KEY`` together with an asymmetric algorithm is refused rather than ignored, so
a half-finished switch of algorithm is noticed at boot, not at the first login.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from core.errors import ToolNotConfiguredError
from core.settings import SettingError, env_int, env_raw, env_secret

from .errors import AuthConfigError
from .passwords import ScryptParams

HMAC_MIN_KEY_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_CURVES = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}
ALLOWED_ALGORITHMS = frozenset(HMAC_MIN_KEY_BYTES) | RSA_ALGORITHMS | frozenset(EC_CURVES)
RSA_MIN_BITS = 2048
MAX_LEEWAY_SECONDS = 300


@dataclass(frozen=True)
class AuthConfig:
    """Everything the tool needs; keys are already loaded and checked."""

    algorithm: str
    signing_key: Any
    """The HMAC secret or the private key; ``None`` for a verify-only deployment."""
    verifying_key: Any
    expire: timedelta
    leeway_seconds: float
    issuer: str | None
    audience: str | None
    scrypt: ScryptParams
    hash_concurrency: int

    def __repr__(self) -> str:  # never print a key
        return f"AuthConfig(algorithm={self.algorithm!r}, issuer={self.issuer!r}, audience={self.audience!r})"


def load_config(environ: Mapping[str, str] | None = None) -> AuthConfig:
    """Read and check ``AUTH_*``; raise ``ToolNotConfiguredError`` or ``AuthConfigError``."""
    algorithm = _text(environ, "AUTH_ALGORITHM") or "HS256"
    if algorithm not in ALLOWED_ALGORITHMS:
        raise AuthConfigError(
            f"AUTH_ALGORITHM={algorithm!r} is not allowed; use one of {', '.join(sorted(ALLOWED_ALGORITHMS))}"
        )
    if algorithm in HMAC_MIN_KEY_BYTES:
        signing_key = verifying_key = _hmac_secret(environ, algorithm)
    else:
        signing_key, verifying_key = _key_pair(environ, algorithm)
    return AuthConfig(
        algorithm=algorithm,
        signing_key=signing_key,
        verifying_key=verifying_key,
        expire=timedelta(minutes=_integer(environ, "AUTH_TOKEN_EXPIRE_MINUTES", 60, low=1, high=525_600)),
        leeway_seconds=float(_integer(environ, "AUTH_LEEWAY_SECONDS", 10, low=0, high=MAX_LEEWAY_SECONDS)),
        issuer=_text(environ, "AUTH_ISSUER"),
        audience=_text(environ, "AUTH_AUDIENCE"),
        scrypt=ScryptParams(
            _integer(environ, "AUTH_SCRYPT_LOG2_N", ScryptParams.log2_n, low=1, high=24),
            _integer(environ, "AUTH_SCRYPT_R", ScryptParams.r, low=1, high=64),
            _integer(environ, "AUTH_SCRYPT_P", ScryptParams.p, low=1, high=64),
        ),
        hash_concurrency=_integer(environ, "AUTH_HASH_CONCURRENCY", os.cpu_count() or 1, low=1, high=256),
    )


def _hmac_secret(environ: Mapping[str, str] | None, algorithm: str) -> bytes:
    raw = env_secret("AUTH_SECRET_KEY", environ=environ)
    if not raw.strip():
        raise ToolNotConfiguredError(
            f"auth is off: set AUTH_SECRET_KEY to a random secret of at least "
            f"{HMAC_MIN_KEY_BYTES[algorithm]} bytes (for example: python -c "
            f'"import secrets; print(secrets.token_urlsafe({HMAC_MIN_KEY_BYTES[algorithm]}))")'
        )
    secret = raw.encode("utf-8")
    needed = HMAC_MIN_KEY_BYTES[algorithm]
    if len(secret) < needed:
        raise AuthConfigError(
            f"AUTH_SECRET_KEY is {len(secret)} bytes; {algorithm} needs at least {needed} random bytes"
        )
    try:  # PyJWT refuses PEM/SSH public keys and certificates as HMAC secrets
        jwt.encode({"probe": True}, secret, algorithm=algorithm)
    except jwt.InvalidKeyError as exc:
        raise AuthConfigError(f"AUTH_SECRET_KEY cannot be used as an HMAC secret: {exc}") from None
    return secret


def _key_pair(environ: Mapping[str, str] | None, algorithm: str) -> tuple[Any, Any]:
    if _text(environ, "AUTH_SECRET_KEY"):
        raise AuthConfigError(
            f"AUTH_SECRET_KEY is set but AUTH_ALGORITHM={algorithm} uses key files "
            "(AUTH_PRIVATE_KEY_FILE / AUTH_PUBLIC_KEY_FILE); unset one of them"
        )
    private_path = _text(environ, "AUTH_PRIVATE_KEY_FILE")
    public_path = _text(environ, "AUTH_PUBLIC_KEY_FILE")
    if private_path is None and public_path is None:
        raise ToolNotConfiguredError(
            f"auth is off: AUTH_ALGORITHM={algorithm} needs AUTH_PRIVATE_KEY_FILE (to issue tokens) "
            "and/or AUTH_PUBLIC_KEY_FILE (to verify them)"
        )
    private_key = public_key = None
    if private_path is not None:
        private_key = _load_pem(private_path, private=True)
        public_key = private_key.public_key()
    if public_path is not None:
        public_key = _load_pem(public_path, private=False)
    _check_key_fits(algorithm, public_key)
    if private_key is not None and _public_numbers(private_key.public_key()) != _public_numbers(public_key):
        raise AuthConfigError("AUTH_PRIVATE_KEY_FILE and AUTH_PUBLIC_KEY_FILE are not the same key pair")
    return private_key, public_key


def _load_pem(path: str, *, private: bool) -> Any:
    variable = "AUTH_PRIVATE_KEY_FILE" if private else "AUTH_PUBLIC_KEY_FILE"
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AuthConfigError(f"{variable}={path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        if private:
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise AuthConfigError(f"{variable}={path!r} is not an unencrypted PEM key: {exc}") from None


def _check_key_fits(algorithm: str, public_key: Any) -> None:
    if algorithm in RSA_ALGORITHMS:
        if not isinstance(public_key, rsa.RSAPublicKey):
            raise AuthConfigError(f"{algorithm} needs an RSA key, got {type(public_key).__name__}")
        if public_key.key_size < RSA_MIN_BITS:
            raise AuthConfigError(
                f"the RSA key has {public_key.key_size} bits; {algorithm} needs at least {RSA_MIN_BITS}"
            )
        return
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        raise AuthConfigError(f"{algorithm} needs an EC key, got {type(public_key).__name__}")
    if public_key.curve.name != EC_CURVES[algorithm]:
        raise AuthConfigError(
            f"{algorithm} needs an EC key on {EC_CURVES[algorithm]}, got one on {public_key.curve.name}"
        )


def _public_numbers(public_key: Any) -> Any:
    return public_key.public_numbers()


def _text(environ: Mapping[str, str] | None, name: str) -> str | None:
    return env_raw(name, environ=environ)


def _integer(environ: Mapping[str, str] | None, name: str, default: int, *, low: int, high: int) -> int:
    try:
        return env_int(name, default, minimum=low, maximum=high, environ=environ)
    except SettingError as exc:
        raise AuthConfigError(str(exc)) from None
