"""``POST /users/register``: create an account (201), or 409 when the username is taken.

Accounts are created by :func:`domains.users.accounts.create_account` (only a scrypt hash is
stored; neither the password nor the hash is logged, returned or published). Registering gives the
``user`` role; the first admin is made with ``python main.py users create --admin NAME`` or the
``KEEL_ADMIN`` bootstrap (``domains/users/plugins/bootstrap_admin.py``). On success the domain
publishes ``user.registered`` with the new id and username when an event bus is present.
"""

from __future__ import annotations

import inspect
from typing import Any

from core import BasePlugin
from domains.users.accounts import USER_ROLES, create_account
from domains.users.models.user import RegisterRequest, UserOut


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
        row = await create_account(self.db, self.auth, data["username"], data["password"], USER_ROLES)
        if self.event_bus is not None:
            published = self.event_bus.publish(
                "user.registered", {"id": row["id"], "username": row["username"]}
            )
            if inspect.isawaitable(published):
                await published
        return UserOut.from_row(row)
