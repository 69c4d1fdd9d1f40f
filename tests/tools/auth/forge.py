"""Hand-built JWTs for the attack battery: any header, any payload, any key, any signature.

PyJWT refuses to produce most hostile tokens (``alg: none`` with a key, a PEM public key as an
HMAC secret), so the battery builds them from the parts, the way an attacker would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

SECRET = "keel-test-secret-" + "0123456789abcdef" * 3  # 65 bytes: long enough for HS512 too
OTHER_SECRET = "another-secret-entirely-" + "fedcba9876543210" * 3

DIGESTS = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def segment(value: Any) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def claims(**overrides: Any) -> dict[str, Any]:
    """A valid claim set (sub, iat, exp in an hour) with ``overrides``; ``None`` removes a claim."""
    now = int(time.time())
    payload: dict[str, Any] = {"sub": "user-1", "iat": now, "exp": now + 3600}
    for key, value in overrides.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value
    return payload


def hmac_token(
    payload: dict[str, Any],
    key: str | bytes = SECRET,
    alg: str = "HS256",
    header: dict[str, Any] | None = None,
) -> str:
    """A token signed with HMAC ``alg`` under ``key`` (any bytes, a PEM public key included)."""
    return sign_segments(segment({"alg": alg, "typ": "JWT", **(header or {})}), segment(payload), key, alg)


def sign_segments(header: str, payload: str, key: str | bytes = SECRET, alg: str = "HS256") -> str:
    """Correctly sign already-encoded segments, whatever they contain."""
    signing_input = f"{header}.{payload}"
    secret = key.encode("utf-8") if isinstance(key, str) else key
    signature = hmac.new(secret, signing_input.encode("ascii"), DIGESTS[alg]).digest()
    return f"{signing_input}.{b64url(signature)}"


def unsigned_token(payload: dict[str, Any], alg: str = "none") -> str:
    return f"{segment({'alg': alg, 'typ': 'JWT'})}.{segment(payload)}."


def swap_payload(token: str, payload: dict[str, Any]) -> str:
    """The same header and signature around another payload (a tampered token)."""
    header, _, signature = token.split(".")
    return f"{header}.{segment(payload)}.{signature}"


def damage_signature(token: str) -> str:
    """The token with one character of its signature changed (one in its middle, where every bit
    counts: the last character carries padding bits a decoder may ignore)."""
    head, _, signature = token.rpartition(".")
    middle = len(signature) // 2
    replacement = "A" if signature[middle] != "A" else "B"
    return f"{head}.{signature[:middle]}{replacement}{signature[middle + 1 :]}"


class Attack(NamedTuple):
    case: str
    forge: Callable[[], str]
    reason: str
    """The ``TokenErrorReason`` value ``verify_token`` must refuse it with."""


NOT_ALLOWED, BAD_SIGNATURE, EXPIRED = "algorithm_not_allowed", "bad_signature", "expired"
NOT_YET_VALID, MISSING, MALFORMED = "not_yet_valid", "missing_claim", "malformed"
HS256_HEADER = segment({"alg": "HS256"})


def _now() -> int:
    return int(time.time())


BATTERY: list[Attack] = [
    Attack("alg none, unsigned", lambda: unsigned_token(claims()), NOT_ALLOWED),
    Attack("alg None spelled differently", lambda: unsigned_token(claims(), alg="None"), NOT_ALLOWED),
    Attack("alg none with a signature", lambda: unsigned_token(claims()) + "c2lnbmF0dXJl", NOT_ALLOWED),
    Attack("another HMAC algorithm", lambda: hmac_token(claims(), alg="HS512"), NOT_ALLOWED),
    Attack("another key", lambda: hmac_token(claims(), key=OTHER_SECRET), BAD_SIGNATURE),
    Attack(
        "tampered payload", lambda: swap_payload(hmac_token(claims()), claims(sub="admin")), BAD_SIGNATURE
    ),
    Attack("stripped signature", lambda: hmac_token(claims()).rsplit(".", 1)[0] + ".", BAD_SIGNATURE),
    Attack("expired", lambda: hmac_token(claims(exp=_now() - 120)), EXPIRED),
    Attack("not valid before", lambda: hmac_token(claims(nbf=_now() + 120)), NOT_YET_VALID),
    Attack("issued in the future", lambda: hmac_token(claims(iat=_now() + 120)), NOT_YET_VALID),
    Attack("no exp", lambda: hmac_token(claims(exp=None)), MISSING),
    Attack("no iat", lambda: hmac_token(claims(iat=None)), MISSING),
    Attack("no sub", lambda: hmac_token(claims(sub=None)), MISSING),
    Attack("empty sub", lambda: hmac_token(claims(sub="")), MISSING),
    Attack("sub not a string", lambda: hmac_token(claims(sub=42)), MALFORMED),
    Attack("exp not a number", lambda: hmac_token(claims(exp="tomorrow")), MALFORMED),
    Attack(
        "unknown critical header", lambda: hmac_token(claims(), header={"crit": ["x-k"], "x-k": 1}), MALFORMED
    ),
    Attack("garbage", lambda: "this-is-not-a-token", MALFORMED),
    Attack("three dots", lambda: "a.b.c", MALFORMED),
    Attack("signed payload is not JSON", lambda: sign_segments(HS256_HEADER, "bm90IGpzb24"), MALFORMED),
    Attack("signed payload is a list", lambda: sign_segments(HS256_HEADER, segment([1, 2])), MALFORMED),
    Attack("oversized", lambda: hmac_token(claims(pad="x" * 10_000)), MALFORMED),
]
"""Hostile tokens for a deployment using HS256 with :data:`SECRET`."""
