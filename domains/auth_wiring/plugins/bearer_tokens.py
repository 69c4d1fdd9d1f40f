"""Bearer tokens for the HTTP API: installs the ``auth`` tool's check as the ``http`` tool's validator.

Tools never import each other, so the two are joined here, in a plugin. At boot, when ``auth`` is
configured, every ``auth=True``/``auth="admin"`` endpoint starts verifying ``Authorization: Bearer``
tokens with ``auth.check_token``; the handler receives the verified claims as
``context["identity"]``. When ``auth`` is OFF (no ``AUTH_SECRET_KEY``) or DEAD (a key it refused),
nothing is installed and the http tool answers ``auth=True`` endpoints with 503 saying
authentication is not configured — never an open door.

The validator uses ``check_token``, which returns a refusal instead of raising it: a bad token is
the client's failure, and raising it through the ToolProxy would count towards marking ``auth``
DEAD, so a handful of garbage tokens could take authentication down for everyone. The refusal is
raised here, outside the proxy, and the http tool turns it into a 401 with ``WWW-Authenticate``.

This lives in its own small domain rather than in ``users`` so that any deployment with ``auth``
configured protects its endpoints (the system ones included), whatever domains it runs.
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin


class BearerTokens(BasePlugin):
    """Verifies bearer tokens on protected endpoints with the auth tool."""

    def __init__(self, http: Any, auth: Any) -> None:
        self.http = http
        self.auth = auth
        self.installed = False

    async def on_boot(self) -> None:
        if not self.auth.configured:
            return
        self.http.set_auth_validator(self.validate)
        self.installed = True

    def validate(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``; raises the auth tool's refusal (a 401) otherwise."""
        check = self.auth.check_token(token)
        if check.error is not None:
            raise check.error
        claims: dict[str, Any] = check.claims
        return claims
