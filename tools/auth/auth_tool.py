"""The ``auth`` tool: JWT bearer tokens and password hashes, configured from ``AUTH_*``.

Configuration (read in ``setup()``; :mod:`tools.auth.config` has the checks), default in brackets:

- ``AUTH_SECRET_KEY`` [none]: the HMAC secret; without it ``auth`` is OFF.
- ``AUTH_ALGORITHM`` [HS256]: HS256/384/512, or RS*/PS*/ES* with the key files below.
- ``AUTH_PRIVATE_KEY_FILE`` / ``AUTH_PUBLIC_KEY_FILE`` [none]: PEM keys for RS/PS/ES; the private
  key is needed to issue tokens, the public one is enough to verify them.
- ``AUTH_TOKEN_EXPIRE_MINUTES`` [60]: a token's lifetime unless ``expires_delta`` is given.
- ``AUTH_LEEWAY_SECONDS`` [10]: clock skew tolerated on ``exp``/``nbf``/``iat`` (0 to 300).
- ``AUTH_ISSUER`` / ``AUTH_AUDIENCE`` [none]: put into new tokens and required of verified ones.
- ``AUTH_SCRYPT_LOG2_N`` / ``AUTH_SCRYPT_R`` / ``AUTH_SCRYPT_P`` [15 / 8 / 3]: password hashing
  cost (:mod:`tools.auth.passwords`).
- ``AUTH_HASH_CONCURRENCY`` [CPU count]: password hashes the async methods compute at once.

Two ways to check a token, because they serve different callers. :meth:`AuthTool.verify_token`
raises a :class:`~tools.auth.errors.TokenError` (a 401 if it escapes a handler).
:meth:`AuthTool.check_token` returns the verdict as a value: the HTTP validator uses it, because a
refused token is the *client's* failure, and raising it through the ToolProxy would count towards
marking ``auth`` DEAD — letting anyone with five garbage tokens take the tool down.

Password hashing is deliberately slow, so the ``a``-prefixed twins (:meth:`AuthTool.ahash_password`,
:meth:`AuthTool.averify_password`) run it in a worker thread (scrypt releases the GIL), at most
``AUTH_HASH_CONCURRENCY`` at once so a login flood queues instead of exhausting memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from core import BaseTool

from . import passwords
from .config import AuthConfig, load_config
from .errors import AuthNotConfiguredError, TokenError
from .tokens import TokenCodec

log = logging.getLogger("keel.auth")

_NOT_CONFIGURED = "auth is not configured on this server (its status in the system dump says what to set)"


@dataclass(frozen=True)
class TokenCheck:
    """The verdict on one token: ``claims`` when it is valid, otherwise ``error``."""

    claims: dict[str, Any] | None
    error: TokenError | None

    @property
    def ok(self) -> bool:
        return self.error is None


class AuthTool(BaseTool):
    """Issues and verifies JWT bearer tokens and hashes passwords."""

    name = "auth"

    def __init__(self) -> None:
        self._config: AuthConfig | None = None
        self._codec: TokenCodec | None = None
        self._hash_slots: asyncio.Semaphore | None = None

    async def setup(self) -> None:
        config = load_config()
        self._codec = TokenCodec(config)
        self._hash_slots = asyncio.Semaphore(config.hash_concurrency)
        self._config = config
        log.info("auth ready: %s, tokens valid %s", config.algorithm, config.expire)

    # -- tokens ---------------------------------------------------------------------------------

    @property
    def configured(self) -> bool:
        """Whether tokens can be checked (setup succeeded); False when auth is OFF or DEAD.

        A property, not a method: the ToolProxy hands attributes through without bookkeeping, while
        a successful *method* call on a DEAD tool would mark it OK ("Recovered") — asking whether
        auth works must not make a misconfigured auth look healthy.
        """
        return self._codec is not None

    def create_token(
        self, subject: str, claims: Mapping[str, Any] | None = None, expires_delta: timedelta | None = None
    ) -> str:
        """A signed token for ``subject`` with extra ``claims``; lifetime ``expires_delta`` or the default."""
        return self._require_codec().create(subject, claims, expires_delta)

    def verify_token(self, token: str) -> dict[str, Any]:
        """The claims of a valid token; raises ``TokenError`` (with a ``reason``) for any other."""
        return self._require_codec().verify(token)

    def check_token(self, token: str) -> TokenCheck:
        """Like ``verify_token`` but returns the verdict instead of raising a ``TokenError``."""
        try:
            return TokenCheck(self._require_codec().verify(token), None)
        except TokenError as exc:
            return TokenCheck(None, exc)

    # -- passwords ------------------------------------------------------------------------------

    def hash_password(self, password: str) -> str:
        """A salted scrypt hash of ``password``, self-describing (parameters and salt included)."""
        return passwords.hash_password(password, self._require_config().scrypt)

    def verify_password(self, password: str, password_hash: str) -> bool:
        """Whether ``password`` matches ``password_hash`` (constant-time comparison)."""
        return passwords.verify_password(password, password_hash)

    def needs_rehash(self, password_hash: str) -> bool:
        """Whether a stored hash was made with other parameters than today's (store a new one)."""
        return passwords.needs_rehash(password_hash, self._require_config().scrypt)

    async def ahash_password(self, password: str) -> str:
        """``hash_password`` in a worker thread, bounded by ``AUTH_HASH_CONCURRENCY``."""
        config = self._require_config()
        async with self._slots():
            return await asyncio.to_thread(passwords.hash_password, password, config.scrypt)

    async def averify_password(self, password: str, password_hash: str) -> bool:
        """``verify_password`` in a worker thread, bounded by ``AUTH_HASH_CONCURRENCY``."""
        async with self._slots():
            return await asyncio.to_thread(passwords.verify_password, password, password_hash)

    # -- internals ------------------------------------------------------------------------------

    def _require_config(self) -> AuthConfig:
        if self._config is None:
            raise AuthNotConfiguredError(_NOT_CONFIGURED)
        return self._config

    def _require_codec(self) -> TokenCodec:
        if self._codec is None:
            raise AuthNotConfiguredError(_NOT_CONFIGURED)
        return self._codec

    def _slots(self) -> asyncio.Semaphore:
        if self._hash_slots is None:
            raise AuthNotConfiguredError(_NOT_CONFIGURED)
        return self._hash_slots
