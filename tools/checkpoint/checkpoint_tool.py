"""The ``checkpoint`` tool: Keel's ``CheckpointPort``, durable versioned run state.

``CHECKPOINT_URL`` picks the database:

================================== ================================================================
unset (default)                    the ``db`` tool's database: ``DATABASE_URL``, else the SQLite
                                   file ``data/keel.db`` under the project root
``sqlite:///relative/path.db``     a SQLite file (``sqlite:////absolute.db``, ``sqlite:///:memory:``)
``postgresql://user:pw@host/db``   PostgreSQL; the state is stored as ``JSONB``
``memory://``                      this process only
================================== ================================================================

Other settings: ``CHECKPOINT_KEEP_VERSIONS`` (default ``20``; ``0`` keeps every version): after each
save only the newest that many versions of the run are kept, so a long run does not grow without
bound (``latest`` is never dropped). ``CHECKPOINT_CONNECT_TIMEOUT`` (5 s), ``CHECKPOINT_POOL_MAX``
(PostgreSQL, 10), ``CHECKPOINT_BUSY_TIMEOUT`` (SQLite, 5 s).

The contract, on every backend (one suite holds them to it, with
``core.state.stores.InMemoryCheckpointStore`` as the reference):

* ``save`` accepts a checkpoint only if its version is at least 1 and above the run's latest, so
  versions strictly increase per run. A save based on a stale version (two producers on one run
  id, each saving "latest + 1") fails for the second with
  :class:`~tools.checkpoint.errors.CheckpointConflict` (a
  ``core.state.stores.CheckpointVersionConflict``) instead of silently forking the run. The check
  and the insert are one transaction, across processes too.
* ``state`` is a JSON document (anything else: ``CheckpointEncodeError``, nothing written);
  ``latest`` / ``at_version`` return ``None`` when there is nothing; ``list_versions`` is ascending;
  ``delete`` removes every version of the run and is idempotent (the run may then start again at 1).
* A database that cannot be reached raises ``CheckpointUnavailableError`` (a
  ``ToolUnavailableError``: the tool is DEAD until a call succeeds; it reconnects by itself).

Each tool opens its own connections (tools never share code or pools), so on the default SQLite
file the ``db`` and ``checkpoint`` tools are two writers of one WAL database, kept apart by
SQLite's lock and the busy timeout.
"""

from __future__ import annotations

import builtins
import logging
from pathlib import Path

from core.base_tool import BaseTool
from core.contracts.ports import Checkpoint
from core.registry import ToolStatus
from core.settings import env_float, env_int, env_str

from .backend import Backend, row_of
from .errors import CheckpointUnavailableError
from .memory_backend import MemoryBackend
from .postgres_backend import PostgresBackend
from .sqlite_backend import SqliteBackend

log = logging.getLogger("keel.checkpoint")

DEFAULT_DATABASE_URL = "sqlite:///data/keel.db"
DEFAULT_KEEP_VERSIONS = 20


class CheckpointTool(BaseTool):
    """Durable, versioned run state with optimistic concurrency: SQLite, PostgreSQL or memory."""

    name = "checkpoint"

    def __init__(self) -> None:
        self._backend: Backend | None = None
        self._reason = "the checkpoint tool is not set up"
        self.keep_versions = DEFAULT_KEEP_VERSIONS

    async def setup(self) -> None:
        url = checkpoint_url()
        backend = url.split(":", 1)[0] if ":" in url else "sqlite"
        shared = backend in ("postgresql", "postgres")  # a database server other processes reach too
        self.kernel_registry.set_capability(self.name, {"backend": backend, "shared": shared})
        try:
            self.keep_versions = _keep_versions()
            self._backend = make_backend(url, self.project_root)
        except ValueError as exc:
            self._reason = f"the checkpoint tool is misconfigured: {exc}"
            raise
        await self._backend.open()
        kept = (
            f"keeps the newest {self.keep_versions} versions" if self.keep_versions else "keeps every version"
        )
        self.kernel_registry.update_tool_status(
            self.name, ToolStatus.OK, f"{self._backend.describe()}; {kept}"
        )

    async def shutdown(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            await backend.close()
        self._reason = "the checkpoint tool has been shut down"

    async def health_check(self) -> bool:
        """True when the database answers."""
        try:
            return await self._ready().ping()
        except CheckpointUnavailableError:
            return False

    # -- CheckpointPort ----------------------------------------------------------------------------

    async def save(self, checkpoint: Checkpoint) -> None:
        """Store a new version of a run; ``CheckpointConflict`` unless it is above the run's latest."""
        await self._ready().save(checkpoint.run_id, row_of(checkpoint), self.keep_versions)

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The run's newest checkpoint, or ``None``."""
        row = await self._ready().latest(run_id)
        return None if row is None else row.checkpoint(run_id)

    async def at_version(self, run_id: str, version: int) -> Checkpoint | None:
        """The run's checkpoint at ``version``, or ``None`` (never saved, pruned or deleted)."""
        row = await self._ready().at_version(run_id, version)
        return None if row is None else row.checkpoint(run_id)

    async def list_versions(self, run_id: str) -> builtins.list[int]:
        """The run's stored versions, ascending."""
        return await self._ready().list_versions(run_id)

    async def delete(self, run_id: str) -> None:
        """Forget every version of the run."""
        await self._ready().delete(run_id)

    def _ready(self) -> Backend:
        if self._backend is None:
            raise CheckpointUnavailableError(self._reason)
        return self._backend


def checkpoint_url() -> str:
    """``CHECKPOINT_URL``, else the ``db`` tool's ``DATABASE_URL``, else its default SQLite file."""
    return env_str("CHECKPOINT_URL") or env_str("DATABASE_URL") or DEFAULT_DATABASE_URL


def make_backend(url: str, project_root: Path) -> Backend:
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "memory":
        return MemoryBackend()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError(
                f"{url!r}: write sqlite:///relative/path.db (from the project root), "
                "sqlite:////absolute/path.db or sqlite:///:memory:"
            )
        raw = rest[1:]
        path = raw if raw == ":memory:" or Path(raw).is_absolute() else str(project_root / raw)
        return SqliteBackend(path, busy_timeout=env_float("CHECKPOINT_BUSY_TIMEOUT", 5.0))
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(
            url,
            pool_max=env_int("CHECKPOINT_POOL_MAX", 10, minimum=1),
            connect_timeout=env_float("CHECKPOINT_CONNECT_TIMEOUT", 5.0),
        )
    raise ValueError(
        f"checkpoint URL scheme {scheme!r} is not supported; use sqlite:///path.db, postgresql://... or memory://"
    )


def _keep_versions() -> int:
    return env_int("CHECKPOINT_KEEP_VERSIONS", DEFAULT_KEEP_VERSIONS, minimum=0)
