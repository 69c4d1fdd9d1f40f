"""Password hashing with scrypt (``hashlib.scrypt``), in a self-describing PHC-style string.

A hash reads ``$scrypt$ln=15,r=8,p=3$<salt>$<digest>`` (salt and digest in unpadded standard
base64), so it carries everything needed to check it later: raising the cost parameters never
invalidates stored hashes, and :func:`needs_rehash` tells a login to store a fresh hash whenever a
stored one was made with parameters other than the current ones (the upgrade path).

Choices:

* The default cost is N=2^15, r=8, p=3: one of the OWASP-listed scrypt settings, 32 MiB of memory
  and roughly a third of a second of one core per hash. It is configurable for slower or faster
  machines, within bounds that keep one hash under 1 GiB of memory.
* Passwords are NFKC-normalised before hashing, so the same password typed on two keyboards that
  produce different Unicode forms of one character still matches.
* Comparison is constant-time (:func:`hmac.compare_digest`); a wrong password is ``False``, while a
  stored hash that cannot be parsed raises :class:`PasswordHashError`: corrupt data is not a wrong
  password, and hiding it would lock a user out silently.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import unicodedata
from dataclasses import dataclass

from .errors import AuthConfigError, PasswordHashError

SCHEME = "scrypt"
SALT_BYTES = 16
DIGEST_BYTES = 32
MAX_MEMORY_BYTES = 1 << 30

_HASH_PATTERN = re.compile(
    r"^\$scrypt\$ln=(?P<ln>\d{1,2}),r=(?P<r>\d{1,3}),p=(?P<p>\d{1,3})\$(?P<salt>[A-Za-z0-9+/]+)\$(?P<digest>[A-Za-z0-9+/]+)$"
)


@dataclass(frozen=True)
class ScryptParams:
    """scrypt's cost: N = 2**log2_n (CPU and memory), r (block size), p (parallelism)."""

    log2_n: int = 15
    r: int = 8
    p: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.log2_n <= 24 or not 1 <= self.r <= 64 or not 1 <= self.p <= 64:
            raise AuthConfigError(
                f"scrypt parameters out of range: log2_n={self.log2_n} (1..24), r={self.r} (1..64), "
                f"p={self.p} (1..64)"
            )
        if self.memory_bytes > MAX_MEMORY_BYTES:
            raise AuthConfigError(
                f"scrypt parameters need {self.memory_bytes >> 20} MiB per hash; the limit is "
                f"{MAX_MEMORY_BYTES >> 20} MiB (lower AUTH_SCRYPT_LOG2_N or AUTH_SCRYPT_R)"
            )

    @property
    def memory_bytes(self) -> int:
        """What one derivation allocates (OpenSSL's own accounting, rounded up)."""
        return 128 * self.r * ((1 << self.log2_n) + 2) + 128 * self.r * self.p

    def encode(self) -> str:
        return f"ln={self.log2_n},r={self.r},p={self.p}"


def hash_password(password: str, params: ScryptParams) -> str:
    """A new salted hash of ``password`` with ``params``."""
    salt = os.urandom(SALT_BYTES)
    digest = _derive(password, salt, params, DIGEST_BYTES)
    return f"${SCHEME}${params.encode()}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches ``encoded``; raises :class:`PasswordHashError` if it is unreadable."""
    params, salt, expected = parse_hash(encoded)
    return hmac.compare_digest(_derive(password, salt, params, len(expected)), expected)


def needs_rehash(encoded: str, params: ScryptParams) -> bool:
    """Whether ``encoded`` should be replaced by a hash made with ``params`` (or is unreadable)."""
    try:
        stored, salt, digest = parse_hash(encoded)
    except PasswordHashError:
        return True
    return stored != params or len(salt) < SALT_BYTES or len(digest) < DIGEST_BYTES


def parse_hash(encoded: str) -> tuple[ScryptParams, bytes, bytes]:
    """The parameters, salt and digest of a hash made by :func:`hash_password`."""
    match = _HASH_PATTERN.match(encoded) if isinstance(encoded, str) else None
    if match is None:
        raise PasswordHashError("not a scrypt password hash this tool can read")
    try:
        params = ScryptParams(int(match["ln"]), int(match["r"]), int(match["p"]))
        salt, digest = _unb64(match["salt"]), _unb64(match["digest"])
    except (AuthConfigError, binascii.Error) as exc:
        raise PasswordHashError(f"unreadable scrypt password hash: {exc}") from None
    if not salt or len(digest) < 16:
        raise PasswordHashError("unreadable scrypt password hash: salt or digest too short")
    return params, salt, digest


def _derive(password: str, salt: bytes, params: ScryptParams, length: int) -> bytes:
    secret = unicodedata.normalize("NFKC", password).encode("utf-8")
    return hashlib.scrypt(
        secret,
        salt=salt,
        n=1 << params.log2_n,
        r=params.r,
        p=params.p,
        maxmem=params.memory_bytes + (1 << 20),
        dklen=length,
    )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
