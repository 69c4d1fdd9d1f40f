"""``POST /users/register``: create an account (201), or 409 when the username is taken.

The password is hashed by the auth tool (scrypt, in a worker thread) and only the hash is stored;
neither the password nor the hash is logged, returned or published. The username is stored
lower-cased. A taken username is detected by the database's unique constraint, not by a prior
SELECT, so two concurrent registrations of one name cannot both succeed. On success the domain
publishes ``user.registered`` with the new id and username when an event bus is present.
"""

from __future__ import annotations

import inspect
import uuid
from datetime import UTC, datetime
from typing import Any

from core import BasePlugin, ConflictError
from domains.users.models.user import RegisterRequest, UserOut

DEFAULT_ROLES = "user"


class RegisterUser(BasePlugin):
    """Creates accounts."""

    def __init__(self, http: Any, db: Any, auth: Any, event_bus: Any = None) -> None:
        self.http = http
        self.db = db
        self.auth = auth
        self.event_bus = event_bus

    async def on_boot(self) -> None:
        self.http.add_endpoint(
            "/users/register",
            "POST",
            self.register,
            request_model=RegisterRequest,
            response_model=UserOut,
            tags=["users"],
            status_code=201,
        )

    async def register(self, data: dict[str, Any], context: dict[str, Any]) -> UserOut:
        username = data["username"].lower()
        password_hash = await self.auth.ahash_password(data["password"])
        row = {
            "id": uuid.uuid4().hex,
            "username": username,
            "roles": DEFAULT_ROLES,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        try:
            await self.db.execute(
                "INSERT INTO users (id, username, password_hash, roles, created_at)"
                " VALUES ($1, $2, $3, $4, $5)",
                [row["id"], username, password_hash, row["roles"], row["created_at"]],
            )
        except Exception as exc:
            if getattr(exc, "kind", None) == "unique_violation":
                raise ConflictError(f"the username {username!r} is already taken") from None
            raise
        if self.event_bus is not None:
            published = self.event_bus.publish("user.registered", {"id": row["id"], "username": username})
            if inspect.isawaitable(published):
                await published
        return UserOut.from_row(row)
