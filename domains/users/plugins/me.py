"""``GET /users/me``: the account behind the bearer token (``auth=True``).

The token's ``sub`` is the account id. An account deleted after its token was issued answers 404
rather than the stale claims: the database, not the token, is the truth about an account.
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin, NotFoundError
from domains.users.models.user import UserOut


class CurrentUser(BasePlugin):
    """Who am I: the caller's own account."""

    def __init__(self, http: Any, db: Any) -> None:
        self.http = http
        self.db = db

    async def on_boot(self) -> None:
        self.http.add_endpoint("/users/me", "GET", self.me, response_model=UserOut, tags=["users"], auth=True)

    async def me(self, data: dict[str, Any], context: dict[str, Any]) -> UserOut:
        row = await self.db.query_one(
            "SELECT id, username, roles, created_at FROM users WHERE id = $1", [context["identity"]["sub"]]
        )
        if row is None:
            raise NotFoundError("the account of this token no longer exists")
        return UserOut.from_row(row)
