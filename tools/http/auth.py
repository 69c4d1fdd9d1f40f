"""Who may call an endpoint: the bearer-token gate in front of handlers registered with ``auth``.

The http tool verifies no token itself: the auth tool (or a plugin) installs a validator,
``validator(token) -> dict`` (sync or async) returning the verified claims or raising. Each
endpoint declares one of four modes:

- ``auth=False``: anyone; ``context["identity"]`` stays ``None``.
- ``auth="optional"``: anyone, but a bearer token that is sent is verified (a bad one is a 401)
  and its claims are ``context["identity"]``; without one, or without a validator installed, the
  identity is ``None``. For handlers that decide themselves what an anonymous caller may do.
- ``auth=True``: a valid bearer token is required. Without a validator installed the endpoint
  answers 503 (authentication is not configured), never an open door.
- ``auth="admin"``: a valid token whose claims make ``is_admin`` true: ``claims["admin"] is True``
  or ``"admin"`` among ``claims["roles"]`` (a list, or a space/comma separated string). Replace the
  rule with ``set_admin_check``. Without a validator installed these endpoints are OPEN: on a
  single machine with the auth tool off, the operator can still read the system endpoints.

A missing token is a 401 with ``WWW-Authenticate: Bearer``; a rejected one adds
``error="invalid_token"``; a valid non-admin token on an admin endpoint is a 403. The token is
read from ``Authorization: Bearer <token>``; server-sent-event endpoints also accept
``?access_token=`` because a browser's ``EventSource`` cannot send headers; the header wins when
both are given. That parameter's value is taken out of the query string before anything logs or
traces the URL (``query_token.py``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

from core.errors import ForbiddenError, RequestError, ServiceUnavailableError, UnauthorizedError

log = logging.getLogger("keel.http")

AuthMode = bool | str
ADMIN = "admin"
OPTIONAL = "optional"
Validator = Callable[[str], Any]
AdminCheck = Callable[[Mapping[str, Any]], bool]


def check_mode(auth: object) -> AuthMode:
    if auth is True or auth is False or auth == ADMIN or auth == OPTIONAL:
        return auth
    raise ValueError(f"auth must be False, True, {OPTIONAL!r} or {ADMIN!r}, got {auth!r}")


def is_admin(identity: Mapping[str, Any]) -> bool:
    if identity.get("admin") is True:
        return True
    roles = identity.get("roles")
    if isinstance(roles, str):
        roles = roles.replace(",", " ").split()
    return isinstance(roles, list | tuple | set | frozenset) and ADMIN in roles


def _unauthorized(message: str, *, invalid: bool) -> UnauthorizedError:
    challenge = 'Bearer error="invalid_token"' if invalid else "Bearer"
    return UnauthorizedError(message, headers={"WWW-Authenticate": challenge})


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization")
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class AuthGate:
    """The validator and admin rule shared by every endpoint of one http tool."""

    def __init__(self) -> None:
        self.validator: Validator | None = None
        self.validator_owner: str | None = None
        self.admin_check: AdminCheck = is_admin
        self.admin_check_owner: str | None = None

    async def identify(self, mode: AuthMode, token: str | None) -> dict[str, Any] | None:
        """The verified claims for an endpoint of ``mode``, or raise the request error to answer."""
        validator = self.validator
        if mode == OPTIONAL and (validator is None or token is None):
            return None
        if validator is None:
            if mode == ADMIN:
                return None
            raise ServiceUnavailableError(
                "authentication is not configured: set AUTH_SECRET_KEY to turn the auth tool on"
            )
        if token is None:
            raise _unauthorized("a bearer token is required", invalid=False)
        try:
            claims = validator(token)
            if inspect.isawaitable(claims):
                claims = await claims
        except RequestError as exc:
            if isinstance(exc, UnauthorizedError):
                raise _unauthorized(str(exc) or "invalid token", invalid=True) from exc
            raise
        except Exception as exc:
            log.warning("the token validator raised %s; answering 401", type(exc).__name__, exc_info=exc)
            raise _unauthorized("invalid token", invalid=True) from exc
        if not claims:
            raise _unauthorized("invalid token", invalid=True)
        if not isinstance(claims, dict):
            raise TypeError(f"the token validator must return a dict of claims, got {type(claims).__name__}")
        if mode == ADMIN and not self.admin_check(claims):
            raise ForbiddenError("this endpoint requires an admin token")
        return claims
