"""Creating accounts, shared by ``POST /users/register``, ``python main.py users create`` and the
``KEEL_ADMIN`` bootstrap: one insert, one rule for a taken name.

The password is hashed by the auth tool (scrypt, in a worker thread) and only the hash is stored.
The username is stored lower-cased. A taken username is detected by the database's unique
constraint, not by a prior SELECT, so two concurrent creations of one name cannot both succeed.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from core import ConflictError

USER_ROLES = ("user",)
ADMIN_ROLES = ("admin", "user")


async def create_account(
    db: Any, auth: Any, username: str, password: str, roles: tuple[str, ...]
) -> dict[str, Any]:
    """Insert the account; its row without the hash. ``ConflictError`` when the name is taken."""
    username = username.lower()
    password_hash = await auth.ahash_password(password)
    row = {
        "id": uuid.uuid4().hex,
        "username": username,
        "roles": " ".join(roles),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        await db.execute(
            "INSERT INTO users (id, username, password_hash, roles, created_at) VALUES ($1, $2, $3, $4, $5)",
            [row["id"], username, password_hash, row["roles"], row["created_at"]],
        )
    except Exception as exc:
        if getattr(exc, "kind", None) == "unique_violation":
            raise ConflictError(f"the username {username!r} is already taken") from None
        raise
    return row


async def grant_admin(db: Any, username: str) -> bool:
    """Add the admin role to an existing account; False when there is no such account."""
    row = await db.query_one("SELECT id, roles FROM users WHERE username = $1", [username.lower()])
    if row is None:
        return False
    roles = str(row["roles"]).split()
    if "admin" not in roles:
        await db.execute(
            "UPDATE users SET roles = $1 WHERE id = $2", [" ".join(["admin", *roles]), row["id"]]
        )
    return True
