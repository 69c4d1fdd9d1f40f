"""Who may do what with agent runs when auth is on: the caller, and the rule for each run.

Auth is on for the agents domain when ``AUTH_SECRET_KEY`` is set, whether or not the ``auth`` tool
managed to start: a key it refused leaves the endpoints with no token validator, which must not
open them, so without a verified token a caller is anonymous and may only use public agents.

* A run belongs to the subject (``sub``) of the token that started it, and to its ``tenant``
  claim when the token has one. Its owner and admins (``admin: true`` or ``"admin"`` among the
  ``roles``) may read, follow and cancel it; anyone else is told it does not exist (404), which
  does not leak that it does.
* An anonymous caller may start runs of public agents only; those runs have no owner, and whoever
  holds the run id (a random 128-bit value) may follow them. Anything else asked anonymously is a
  401 with a ``Bearer`` challenge.
* With auth off (one machine, no ``AUTH_SECRET_KEY``) everybody is an anonymous admin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import NotFoundError, UnauthorizedError
from core.settings import env_raw

ADMIN_ROLE = "admin"
TENANT_CLAIM = "tenant"


def auth_required() -> bool:
    """Whether the agents endpoints need tokens: ``AUTH_SECRET_KEY`` is set."""
    return env_raw("AUTH_SECRET_KEY") is not None


@dataclass(frozen=True)
class Caller:
    """The verified caller of one request (``subject`` None: anonymous)."""

    subject: str | None
    tenant: str | None = None
    admin: bool = False

    @classmethod
    def of(cls, identity: Mapping[str, Any] | None, *, protected: bool) -> Caller:
        if not protected:
            return cls(None, None, admin=True)
        if not identity or not identity.get("sub"):
            return cls(None)
        tenant = identity.get(TENANT_CLAIM)
        return cls(str(identity["sub"]), str(tenant) if tenant else None, admin=_is_admin(identity))

    @property
    def anonymous(self) -> bool:
        return self.subject is None and not self.admin

    def may_see(self, owner: str | None) -> bool:
        return self.admin or owner is None or owner == self.subject


def token_required(what: str) -> UnauthorizedError:
    return UnauthorizedError(f"a bearer token is required to {what}", headers={"WWW-Authenticate": "Bearer"})


def check_run(caller: Caller, run_id: str, owner: str | None) -> None:
    """Raise unless ``caller`` may use run ``run_id`` of ``owner`` (404 to a signed-in stranger)."""
    if caller.may_see(owner):
        return
    if caller.anonymous:
        raise token_required("use this run")
    raise NotFoundError(f"no agent run {run_id!r}")


def _is_admin(identity: Mapping[str, Any]) -> bool:
    if identity.get("admin") is True:
        return True
    roles = identity.get("roles")
    if isinstance(roles, str):
        roles = roles.replace(",", " ").split()
    return isinstance(roles, list | tuple | set | frozenset) and ADMIN_ROLE in roles
