"""``POST /users/login``: exchange a username and password for a bearer token, with brute-force limits.

Failed logins are limited two ways, and neither can be used to lock someone else out:

* per **account and address pair**, with a backoff: after ``LOGIN_MAX_FAILURES`` failures (default
  5) for one username from one client address, that pair must wait ``LOGIN_BACKOFF_SECONDS``
  (default 60) before its next attempt, twice as long after each further failure, up to
  ``LOGIN_BACKOFF_MAX_SECONDS`` (default 900). Waiting means 429 with ``Retry-After`` — even with
  the right password, or the limit would only slow a guesser down. A pair's count is forgotten
  ``LOGIN_FAILURE_WINDOW_SECONDS`` (default 900) after its wait ends, or at once on a success;
* per **address**, in a sliding window: ``LOGIN_MAX_FAILURES_PER_ADDRESS`` failures (default 20)
  within ``LOGIN_FAILURE_WINDOW_SECONDS`` from one address, whatever the usernames, answer 429 until
  the oldest leaves the window. It stops one address spraying guesses over many accounts.

There is deliberately no limit per account alone: any stranger could then lock any account by
failing to log in as it. A guesser on one account is held back per address it uses (each address
gets five free guesses, then exponentially fewer, and at most 20 failures per window over all
accounts); a victim logging in from their own address is not affected by what other addresses do.
The cost of that choice is a distributed guesser with many addresses, which only strong passwords
(and scrypt's cost per guess) hold back.

Choices made here:

* Each attempt counts as a failure *before* the password is checked and is forgiven on success (or
  when the server itself fails, say the database is down), so twenty parallel guesses cannot all
  slip in while the first hashes are still being computed.
* A success clears the pair's failures but only forgives its own attempt at the address: an
  attacker who owns one account cannot reset the address limit by logging into it.
* An unknown username costs the same password check (against a throwaway hash) and gives the same
  401 as a wrong password, so response times and messages do not reveal which accounts exist.
* A stored hash made with older cost parameters is replaced on a successful login (the auth tool's
  ``needs_rehash``), so raising the cost upgrades accounts as people sign in.
* The counters live in this process (bounded to ``MAX_TRACKED_KEYS`` keys each, oldest evicted):
  several processes behind a load balancer each keep their own, so the effective limit is the
  per-process limit times the number of processes. The address is the connecting peer's unless
  the http tool trusts the proxy in front (``HTTP_TRUSTED_PROXIES``): then it is the address the
  proxy forwards. Forwarded headers from anyone else are ignored, so they cannot dodge the limits.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from core import BasePlugin, TooManyRequestsError, UnauthorizedError
from core.settings import env_float
from domains.users.models.user import LoginRequest, TokenOut

MAX_TRACKED_KEYS = 100_000
UNKNOWN_ADDRESS = "unknown"


class TooManyLoginAttempts(TooManyRequestsError):
    """429: too many failed logins; ``Retry-After`` says when to try again."""

    def __init__(self, retry_after: float) -> None:
        seconds = max(1, math.ceil(retry_after))
        super().__init__(f"too many failed logins; try again in {seconds} seconds", retry_after=seconds)


class LoginThrottle:
    """Failure timestamps per key in a sliding window of ``window`` seconds, at most ``limit`` each."""

    def __init__(
        self,
        limit: int,
        window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_TRACKED_KEYS,
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError(f"a login throttle needs limit >= 1 and window > 0, got {limit} and {window}")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._max_keys = max_keys
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, key: str) -> float | None:
        """Seconds until ``key`` may try again, or ``None`` when it may try now."""
        failures = self._current(key)
        if failures is None or len(failures) < self.limit:
            return None
        return failures[-self.limit] + self.window - self._clock()

    def record_failure(self, key: str) -> None:
        failures = self._current(key)
        if failures is None:
            failures = self._failures[key] = deque()
        failures.append(self._clock())
        self._failures.move_to_end(key)
        while len(self._failures) > self._max_keys:
            self._failures.popitem(last=False)

    def forgive_one(self, key: str) -> None:
        """Take back the most recent failure of ``key`` (an attempt that turned out to succeed)."""
        failures = self._failures.get(key)
        if failures:
            failures.pop()
            if not failures:
                del self._failures[key]

    def reset(self, key: str) -> None:
        self._failures.pop(key, None)

    def _current(self, key: str) -> deque[float] | None:
        failures = self._failures.get(key)
        if failures is None:
            return None
        horizon = self._clock() - self.window
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures


class LoginBackoff:
    """Per key: ``free`` failures, then a wait of ``base`` seconds doubling with each further failure.

    A key whose wait has been over for ``forget_after`` seconds starts afresh.
    """

    def __init__(
        self,
        free: int,
        base: float,
        cap: float,
        forget_after: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_TRACKED_KEYS,
    ) -> None:
        if free < 1 or base <= 0 or cap < base or forget_after <= 0:
            raise ValueError(
                f"a login backoff needs free >= 1, 0 < base <= cap and forget_after > 0, "
                f"got {free}, {base}, {cap} and {forget_after}"
            )
        self.free, self.base, self.cap, self.forget_after = free, base, cap, forget_after
        self._clock = clock
        self._max_keys = max_keys
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def wait_after(self, failures: int) -> float:
        if failures < self.free:
            return 0.0
        return float(min(self.cap, self.base * 2 ** min(failures - self.free, 64)))

    def retry_after(self, key: str) -> float | None:
        """Seconds until ``key`` may try again, or ``None`` when it may try now."""
        entry = self._current(key)
        if entry is None:
            return None
        count, last = entry
        remaining = last + self.wait_after(count) - self._clock()
        return remaining if remaining > 0 else None

    def record_failure(self, key: str) -> None:
        entry = self._current(key)
        count = entry[0] if entry is not None else 0
        self._failures[key] = (count + 1, self._clock())
        self._failures.move_to_end(key)
        while len(self._failures) > self._max_keys:
            self._failures.popitem(last=False)

    def forgive_one(self, key: str) -> None:
        """Take back the most recent failure of ``key`` (an attempt that turned out to succeed)."""
        entry = self._failures.get(key)
        if entry is None:
            return
        if entry[0] <= 1:
            del self._failures[key]
        else:
            self._failures[key] = (entry[0] - 1, entry[1])

    def reset(self, key: str) -> None:
        self._failures.pop(key, None)

    def _current(self, key: str) -> tuple[int, float] | None:
        entry = self._failures.get(key)
        if entry is None:
            return None
        count, last = entry
        if self._clock() > last + self.wait_after(count) + self.forget_after:
            del self._failures[key]
            return None
        return entry


def pair_key(username: str, address: str) -> str:
    return f"{address}\x00{username}"


class LoginUser(BasePlugin):
    """Issues bearer tokens for valid credentials."""

    def __init__(self, http: Any, db: Any, auth: Any) -> None:
        self.http = http
        self.db = db
        self.auth = auth
        window = env_float("LOGIN_FAILURE_WINDOW_SECONDS", 900, above=True)
        self.pairs = LoginBackoff(
            int(env_float("LOGIN_MAX_FAILURES", 5, above=True)),
            env_float("LOGIN_BACKOFF_SECONDS", 60, above=True),
            env_float("LOGIN_BACKOFF_MAX_SECONDS", 900, above=True),
            window,
        )
        self.addresses = LoginThrottle(
            int(env_float("LOGIN_MAX_FAILURES_PER_ADDRESS", 20, above=True)), window
        )
        self._decoy_hash: str | None = None
        self._decoy_lock = asyncio.Lock()

    async def on_boot(self) -> None:
        self.http.add_endpoint(
            "/users/login",
            "POST",
            self.login,
            request_model=LoginRequest,
            response_model=TokenOut,
            tags=["users"],
        )

    async def login(self, data: dict[str, Any], context: dict[str, Any]) -> TokenOut:
        username = data["username"].lower()
        address = context.get("client") or UNKNOWN_ADDRESS
        pair = pair_key(username, address)
        waits = [w for w in (self.pairs.retry_after(pair), self.addresses.retry_after(address)) if w]
        if waits:
            raise TooManyLoginAttempts(max(waits))
        self.pairs.record_failure(pair)
        self.addresses.record_failure(address)
        try:
            row = await self.db.query_one(
                "SELECT id, username, password_hash, roles FROM users WHERE username = $1", [username]
            )
            stored = row["password_hash"] if row is not None else await self._decoy()
            valid = await self.auth.averify_password(data["password"], stored) and row is not None
        except BaseException:
            # The server failed (database down, cancelled request), not the caller's guess.
            self.pairs.forgive_one(pair)
            self.addresses.forgive_one(address)
            raise
        if not valid:
            raise _bad_credentials()
        self.pairs.reset(pair)
        self.addresses.forgive_one(address)
        if self.auth.needs_rehash(stored):
            fresh = await self.auth.ahash_password(data["password"])
            await self.db.execute("UPDATE users SET password_hash = $1 WHERE id = $2", [fresh, row["id"]])
        token = self.auth.create_token(
            row["id"], {"username": row["username"], "roles": str(row["roles"]).split()}
        )
        claims = self.auth.verify_token(token)
        return TokenOut(access_token=token, expires_in=int(claims["exp"]) - int(claims["iat"]))

    async def _decoy(self) -> str:
        async with self._decoy_lock:
            if self._decoy_hash is None:
                self._decoy_hash = await self.auth.ahash_password(secrets.token_urlsafe(32))
            return self._decoy_hash


def _bad_credentials() -> UnauthorizedError:
    return UnauthorizedError("invalid username or password", headers={"WWW-Authenticate": "Bearer"})
