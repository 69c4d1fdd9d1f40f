"""The errors the ``auth`` tool raises, so callers can branch on what went wrong without PyJWT.

A refused token is a :class:`TokenError` whose ``reason`` (a closed :class:`TokenErrorReason`) says
why: expired, bad signature, algorithm not allowed... It is an
:class:`~core.errors.UnauthorizedError`, so a plugin that lets it propagate out of an HTTP handler
answers 401 with no mapping of its own. ``kind`` keeps the HTTP error kind (``unauthorized``) that
every request error carries, which is why the token-specific reason has its own attribute. The
message is safe to show a client: it names the reason, never the key or the token.

Configuration mistakes found in ``setup()`` raise :class:`AuthConfigError`, which the kernel turns
into a DEAD tool with the message as the reason. Calling the tool while it is OFF or DEAD raises
:class:`AuthNotConfiguredError`, a 503: the service is up, this part of it is not.
"""

from __future__ import annotations

from enum import StrEnum

from core.errors import KeelError, ServiceUnavailableError, UnauthorizedError


class TokenErrorReason(StrEnum):
    """Why a token was refused."""

    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    BAD_SIGNATURE = "bad_signature"
    ALGORITHM_NOT_ALLOWED = "algorithm_not_allowed"
    MALFORMED = "malformed"
    MISSING_CLAIM = "missing_claim"
    WRONG_ISSUER = "wrong_issuer"
    WRONG_AUDIENCE = "wrong_audience"


class TokenError(UnauthorizedError):
    """A bearer token was refused; ``reason`` says why."""

    def __init__(self, reason: TokenErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __repr__(self) -> str:
        return f"TokenError({self.reason.value!r}, {str(self)!r})"


class AuthConfigError(KeelError):
    """``auth`` is configured in a way that cannot be used safely (a short key, an unknown algorithm)."""


class AuthNotConfiguredError(ServiceUnavailableError):
    """A method was called while ``auth`` is OFF or DEAD: a 503 if it escapes an HTTP handler."""


class PasswordHashError(KeelError):
    """A stored password hash cannot be read: it is corrupt or uses a scheme this tool does not know."""
