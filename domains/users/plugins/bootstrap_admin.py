"""The ``KEEL_ADMIN`` bootstrap: make the first admin at boot, from the environment.

With ``KEEL_ADMIN`` (a username) and ``KEEL_ADMIN_PASSWORD`` set, booting creates that account
with the admin role unless an account of that name already exists — an existing account is left
exactly as it is (its password and roles are never reset from the environment), so the variables
can stay set across restarts. Several processes booting together create it once (the database's
unique constraint decides). ``KEEL_ADMIN`` without a password makes this plugin DEAD saying so.
Unset (the default), it does nothing; ``python main.py users create --admin NAME`` is the other
way to the first admin.
"""

from __future__ import annotations

import logging
from typing import Any

from core import BasePlugin, ConflictError
from core.settings import env_secret, env_str
from domains.users.accounts import ADMIN_ROLES, create_account
from domains.users.models.user import RegisterRequest

log = logging.getLogger("keel.users")


class BootstrapAdmin(BasePlugin):
    """Creates the ``KEEL_ADMIN`` account at boot when it does not exist."""

    def __init__(self, db: Any, auth: Any) -> None:
        self.db = db
        self.auth = auth

    async def on_boot(self) -> None:
        username = env_str("KEEL_ADMIN")
        if not username:
            return
        password = env_secret("KEEL_ADMIN_PASSWORD")
        if not password:
            raise ValueError("KEEL_ADMIN is set but KEEL_ADMIN_PASSWORD is not: the admin needs a password")
        RegisterRequest(username=username, password=password)  # the same rules as registering
        existing = await self.db.query_one("SELECT id FROM users WHERE username = $1", [username.lower()])
        if existing is not None:
            return
        try:
            await create_account(self.db, self.auth, username, password, ADMIN_ROLES)
        except ConflictError:
            return  # another process created it just now
        log.info("created the admin account %s (KEEL_ADMIN)", username.lower())
