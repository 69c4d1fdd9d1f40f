"""The ``store`` tool: Keel's ``StorePort`` (key-value with expiry, lists and counters) on four backends.

``STORE_URL`` picks where the values live; the behaviour is the same on each, and one contract
suite holds every backend (and ``core.state.stores.InMemoryStore``, the reference) to it:

==================================== ==============================================================
``memory://`` (default)              this process only (:mod:`tools.store.memory_backend`)
``sqlite:///relative/path.db``       a SQLite file, relative to the project root (``sqlite:////abs``)
``postgresql://user:pw@host/db``     a PostgreSQL table (:mod:`tools.store.postgres_backend`)
``redis://host:6379/0``              Redis (:mod:`tools.store.redis_backend`)
==================================== ==============================================================

Other settings: ``STORE_KEY_PREFIX`` (Redis key prefix, default ``keel:store:``),
``STORE_CONNECT_TIMEOUT`` (seconds, default 5), ``STORE_BUSY_TIMEOUT`` (SQLite, default 5),
``STORE_POOL_MAX`` (PostgreSQL, default 10).

The contract, whatever the backend:

* Keys are partitioned by ``scope`` (``None`` is ``Scope()``): the same key in two scopes names two
  values. Values are JSON documents, stored as JSON text: a value that is not one raises
  :class:`~tools.store.errors.StoreEncodeError` before anything is written, and what comes back is
  what JSON gives back (a tuple comes back a list). ``get`` of a missing or expired key is ``None``.
* ``ttl`` is in seconds and must be positive (``ValueError`` otherwise); an entry is gone once it is
  ``ttl`` old.
* ``get_or_set`` runs ``fn`` at most once per key at a time in this process (concurrent callers
  wait for the first), never stores a producer that raised, and returns the stored value. Across
  processes the first value stored wins: a process that lost the race returns the winner's value.
* ``append`` / ``list`` keep a list under a key (``list`` of a missing key is ``[]``); a key holding
  anything else raises ``StoreValueError``. ``append`` keeps the key's expiry.
* ``increment`` counts in integers: ``by`` must be an ``int`` (not a ``bool``, not ``2.0``) and the key
  missing or an integer, otherwise ``StoreValueError`` with the same message everywhere. A missing
  key counts from zero and takes ``ttl``; later increments keep the first expiry.
* A backend that cannot be reached raises ``StoreUnavailable`` (as
  :class:`~tools.store.errors.StoreBackendUnavailable`, so the proxy marks the tool DEAD until a call
  succeeds). If it cannot be reached at ``setup()`` the tool starts DEAD and connects on the next call.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from core.base_tool import BaseTool
from core.contracts.errors import StoreValueError, require_integer_amount
from core.contracts.types import Scope
from core.execution.keyed_lock import KeyedLock
from core.registry import ToolStatus
from core.settings import env_float, env_int, env_str

from .backend import Backend, NotACounter, NotAList, decode, encode
from .errors import StoreBackendUnavailable, not_a_list
from .memory_backend import MemoryBackend
from .not_ready import NotReadyBackend
from .postgres_backend import PostgresBackend
from .redis_backend import RedisBackend
from .sqlite_backend import SqliteBackend

log = logging.getLogger("keel.store")

DEFAULT_URL = "memory://"
_ZERO = Scope()


class StoreTool(BaseTool):
    """Key-value store with expiry, lists and counters: in memory, SQLite, PostgreSQL or Redis."""

    name = "store"

    def __init__(self) -> None:
        self._backend: Backend = NotReadyBackend("the store is not set up")
        self._locks = KeyedLock()

    async def setup(self) -> None:
        url = env_str("STORE_URL")
        backend = url.split(":", 1)[0] if ":" in url else "memory"
        # What other processes can share: a database or Redis server, not this process's memory.
        shared = backend in ("postgresql", "postgres", "redis", "rediss")
        self.kernel_registry.set_capability(self.name, {"backend": backend, "shared": shared})
        try:
            self._backend = make_backend(url, self.project_root)
        except ValueError as exc:
            self._backend = NotReadyBackend(f"the store is misconfigured: {exc}")
            raise
        await self._backend.open()
        self.kernel_registry.update_tool_status(self.name, ToolStatus.OK, self._backend.describe())

    async def shutdown(self) -> None:
        await self._backend.close()

    async def health_check(self) -> bool:
        """True when the backing store answers."""
        try:
            return await self._backend.ping()
        except StoreBackendUnavailable:
            return False

    # -- plain values ------------------------------------------------------------------------------

    async def get(self, key: str, *, scope: Scope | None = None) -> Any | None:
        """The value under ``key``, or ``None`` when it is missing or expired."""
        text = await self._backend.lookup(_scope(scope), key)
        return None if text is None else decode(text)

    async def set(
        self, key: str, value: Any, *, ttl: float | None = None, scope: Scope | None = None
    ) -> None:
        """Store ``value`` (a JSON document) under ``key``, for ``ttl`` seconds or for good."""
        _check_ttl(ttl)
        await self._backend.put(_scope(scope), key, encode(value, key), ttl)

    async def delete(self, key: str, *, scope: Scope | None = None) -> None:
        """Forget ``key`` (nothing happens when it is missing)."""
        await self._backend.delete(_scope(scope), key)

    async def get_or_set(
        self,
        key: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        ttl: float | None = None,
        scope: Scope | None = None,
    ) -> Any:
        """The value under ``key``; when missing, ``await fn()`` once, store it and return what was stored."""
        _check_ttl(ttl)
        partition = _scope(scope)
        text = await self._backend.lookup(partition, key)
        if text is not None:
            return decode(text)
        full = (partition, key)
        async with self._locks.hold(full):
            text = await self._backend.lookup(partition, key)
            if text is not None:
                return decode(text)
            produced = encode(await fn(), key)
            winner = await self._backend.add(partition, key, produced, ttl)
            return decode(produced if winner is None else winner)

    # -- lists -------------------------------------------------------------------------------------

    async def append(self, key: str, value: Any, *, scope: Scope | None = None) -> None:
        """Add ``value`` to the end of the list under ``key`` (a missing key starts a list)."""
        item = encode(value, key)
        try:
            await self._backend.append(_scope(scope), key, item)
        except NotAList:
            raise not_a_list("append to", key) from None

    async def list(self, key: str, *, scope: Scope | None = None) -> builtins.list[Any]:
        """The list under ``key`` (``[]`` when missing)."""
        text = await self._backend.lookup(_scope(scope), key)
        if text is None:
            return []
        value = decode(text)
        if not isinstance(value, builtins.list):
            raise not_a_list("list", key)
        return value

    # -- counters ----------------------------------------------------------------------------------

    async def increment(
        self, key: str, by: int = 1, *, ttl: float | None = None, scope: Scope | None = None
    ) -> int:
        """Add ``by`` to the integer counter under ``key`` and return the new total."""
        amount = require_integer_amount(key, by)
        _check_ttl(ttl)
        try:
            return await self._backend.increment(_scope(scope), key, amount, ttl)
        except NotACounter:
            raise StoreValueError.not_a_counter(key) from None


def make_backend(url: str, project_root: Path) -> Backend:
    """The backend ``STORE_URL`` names (empty: ``memory://``)."""
    url = url.strip() or DEFAULT_URL
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    timeout = env_float("STORE_CONNECT_TIMEOUT", 5.0)
    if scheme == "memory":
        return MemoryBackend()
    if scheme == "sqlite":
        return SqliteBackend(
            _sqlite_path(url, rest, project_root), busy_timeout=env_float("STORE_BUSY_TIMEOUT", 5.0)
        )
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(
            url, pool_max=env_int("STORE_POOL_MAX", 10, minimum=1), connect_timeout=timeout
        )
    if scheme in ("redis", "rediss", "unix"):
        prefix = env_str("STORE_KEY_PREFIX", "keel:store:")
        return RedisBackend(url, prefix=prefix, connect_timeout=timeout)
    raise ValueError(
        f"STORE_URL scheme {scheme!r} is not supported; use memory://, sqlite:///path.db, "
        "postgresql://... or redis://..."
    )


def _sqlite_path(url: str, rest: str, project_root: Path) -> str:
    if not rest.startswith("/") or rest == "/":
        raise ValueError(
            f"STORE_URL={url!r}: write sqlite:///relative/path.db (from the project root), "
            "sqlite:////absolute/path.db or sqlite:///:memory:"
        )
    raw = rest[1:]
    if raw == ":memory:" or Path(raw).is_absolute():
        return raw
    return str(project_root / raw)


def _scope(scope: Scope | None) -> str:
    return (scope if scope is not None else _ZERO).key()


def _check_ttl(ttl: float | None) -> None:
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0):
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
