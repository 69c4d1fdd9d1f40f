"""Issuing and verifying JWTs with PyJWT, under one fixed algorithm and with PyJWT's errors mapped.

Verification pins everything an attacker could otherwise influence: the algorithm allow-list is
the one configured algorithm (so ``alg: none``, another HMAC size, or an RS/HS swap that uses a
public key as an HMAC secret are all refused before any signature is computed); ``exp``, ``iat``
and ``sub`` must be present; ``nbf``/``iat`` in the future and ``exp`` in the past are refused
beyond a small leeway; issuer and audience are checked when configured. Every refusal is a
:class:`~tools.auth.errors.TokenError` with a reason, and nothing a client sends can make this
module raise anything else.

Tokens carry a random ``jti`` so a later revocation list has something to name. The registered
claims are this module's to set: a caller passing ``exp`` or ``sub`` in ``claims`` is a bug, and is
told so with a ``ValueError`` instead of being silently overridden.

A client sends the same token on every request, and a full check (PyJWT's base64 validation, JSON,
HMAC) costs tens of microseconds, so tokens that passed are remembered (the last
``VERIFIED_CACHE_SIZE``, keyed by the exact token text). A remembered token is re-checked for
expiry on every use — the only verdict that can change with time, since a token valid once stays
past its ``nbf``/``iat`` — and its claims are decoded afresh from JSON, so a caller that edits the
dict it gets cannot affect the next caller. Refused tokens are never remembered, so garbage cannot
evict good entries.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import jwt

from .config import AuthConfig
from .errors import AuthNotConfiguredError, TokenError, TokenErrorReason

REQUIRED_CLAIMS = ("exp", "iat", "sub")
RESERVED_CLAIMS = frozenset({"sub", "iat", "exp", "nbf", "iss", "aud", "jti"})
MAX_TOKEN_CHARS = 8192
VERIFIED_CACHE_SIZE = 4096

_REFUSALS: tuple[tuple[type[Exception], TokenErrorReason, str], ...] = (
    # Order matters: specific PyJWT errors before their bases.
    (jwt.ExpiredSignatureError, TokenErrorReason.EXPIRED, "token has expired"),
    (jwt.ImmatureSignatureError, TokenErrorReason.NOT_YET_VALID, "token is not valid yet"),
    (jwt.InvalidAlgorithmError, TokenErrorReason.ALGORITHM_NOT_ALLOWED, "token algorithm is not allowed"),
    (jwt.InvalidSignatureError, TokenErrorReason.BAD_SIGNATURE, "token signature is invalid"),
    (jwt.MissingRequiredClaimError, TokenErrorReason.MISSING_CLAIM, "token lacks a required claim"),
    (jwt.InvalidIssuerError, TokenErrorReason.WRONG_ISSUER, "token issuer is not accepted"),
    (jwt.InvalidAudienceError, TokenErrorReason.WRONG_AUDIENCE, "token audience is not accepted"),
    (jwt.PyJWTError, TokenErrorReason.MALFORMED, "token is malformed"),
)


class TokenCodec:
    """Creates and checks tokens for one :class:`~tools.auth.config.AuthConfig`."""

    def __init__(self, config: AuthConfig) -> None:
        self._config = config
        self._algorithms = [config.algorithm]
        self._required = [*REQUIRED_CLAIMS]
        if config.issuer is not None:
            self._required.append("iss")
        if config.audience is not None:
            self._required.append("aud")
        self._options: Any = {
            "require": self._required,
            "verify_signature": True,
            "verify_exp": True,
            "verify_nbf": True,
            "verify_iat": True,
            "verify_iss": True,
            "verify_aud": True,
            "verify_sub": True,
            "verify_jti": True,
            "enforce_minimum_key_length": True,
        }
        self._verified: dict[str, tuple[float, str]] = {}
        """token -> (exp, claims as JSON) for tokens that passed every check."""
        self._verified_lock = threading.Lock()

    def create(
        self, subject: str, claims: Mapping[str, Any] | None = None, expires_delta: timedelta | None = None
    ) -> str:
        if not isinstance(subject, str) or not subject:
            raise ValueError("a token subject must be a non-empty string")
        extra = dict(claims or {})
        clashing = sorted(RESERVED_CLAIMS & extra.keys())
        if clashing:
            raise ValueError(f"claims may not set the registered claims {clashing}; they are set by auth")
        lifetime = self._config.expire if expires_delta is None else expires_delta
        if lifetime <= timedelta(0):
            raise ValueError(f"expires_delta must be positive, got {lifetime}")
        if self._config.signing_key is None:
            raise AuthNotConfiguredError(
                "this server only verifies tokens: set AUTH_PRIVATE_KEY_FILE to issue"
            )
        now = int(time.time())
        payload: dict[str, Any] = {
            **extra,
            "sub": subject,
            "iat": now,
            "exp": now + max(1, int(lifetime.total_seconds())),
            "jti": uuid.uuid4().hex,
        }
        if self._config.issuer is not None:
            payload["iss"] = self._config.issuer
        if self._config.audience is not None:
            payload["aud"] = self._config.audience
        return jwt.encode(payload, self._config.signing_key, algorithm=self._config.algorithm)

    def verify(self, token: str) -> dict[str, Any]:
        remembered = self._verified.get(token) if isinstance(token, str) else None
        if remembered is not None:
            expires, claims_json = remembered
            if expires > time.time() - self._config.leeway_seconds:
                loaded: dict[str, Any] = json.loads(claims_json)
                return loaded
            with self._verified_lock:
                self._verified.pop(token, None)
        claims = self._verify_fully(token)
        self._remember(token, claims)
        return claims

    def _remember(self, token: str | bytes, claims: dict[str, Any]) -> None:
        if not isinstance(token, str):
            return
        try:
            entry = (float(int(claims["exp"])), json.dumps(claims))  # PyJWT compares int(exp)
        except (TypeError, ValueError):
            return
        with self._verified_lock:
            self._verified[token] = entry
            while len(self._verified) > VERIFIED_CACHE_SIZE:
                del self._verified[next(iter(self._verified))]

    def _verify_fully(self, token: str) -> dict[str, Any]:
        if isinstance(token, bytes):
            try:
                token = token.decode("ascii")
            except UnicodeDecodeError:
                raise TokenError(TokenErrorReason.MALFORMED, "token is malformed") from None
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
            raise TokenError(TokenErrorReason.MALFORMED, "token is malformed")
        try:
            claims = jwt.decode(
                token,
                self._config.verifying_key,
                algorithms=self._algorithms,
                options=self._options,
                audience=self._config.audience,
                issuer=self._config.issuer,
                leeway=self._config.leeway_seconds,
            )
        except jwt.PyJWTError as exc:
            raise _refusal(exc) from None
        except (ValueError, TypeError, OverflowError):
            # Defence in depth: a token PyJWT does not wrap (odd JSON types) is still just malformed.
            raise TokenError(TokenErrorReason.MALFORMED, "token is malformed") from None
        if not isinstance(claims, dict) or not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise TokenError(TokenErrorReason.MISSING_CLAIM, "token lacks a required claim")
        return claims


def _refusal(exc: Exception) -> TokenError:
    for error_type, reason, message in _REFUSALS:
        if isinstance(exc, error_type):
            if isinstance(exc, jwt.MissingRequiredClaimError):
                message = f"token lacks the required claim {exc.claim!r}"
            return TokenError(reason, message)
    return TokenError(TokenErrorReason.MALFORMED, "token is malformed")  # pragma: no cover - PyJWTError above
