"""The shapes the users domain accepts and returns over HTTP.

Usernames are 3–32 characters of ``A-Z a-z 0-9 . _ -`` and are stored lower-cased, so ``Ada`` and
``ada`` are one account. Passwords are 8–256 characters: long enough to matter, short enough that
nobody can make the server hash a megabyte. Validation messages never echo the value sent, so a
password never appears in an error response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RegisterRequest(BaseModel):
    """A new account: a username and a password."""

    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=3, max_length=32, pattern=r"^[A-Za-z0-9._-]+$")
    password: str = Field(min_length=8, max_length=256)


class LoginRequest(BaseModel):
    """Credentials to exchange for a bearer token."""

    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=256)


class UserOut(BaseModel):
    """An account as the API shows it: never its password hash."""

    id: str
    username: str
    roles: list[str]
    created_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> UserOut:
        """From a ``users`` row (roles are stored space-separated)."""
        return cls(
            id=row["id"],
            username=row["username"],
            roles=str(row["roles"]).split(),
            created_at=row["created_at"],
        )


class TokenOut(BaseModel):
    """A bearer token and how many seconds it stays valid."""

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int
