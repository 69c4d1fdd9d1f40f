"""The ``agent_runs`` table (``migrations/agents``): which runs exist, which may need work, and who
is running each one (its lease).

A run's state is its checkpoints; this table lets a process find the runs that are in flight (a
checkpoint store cannot be listed) and decides which process runs each of them. Rows are written
when a run starts and updated when it ends; a process that dies in between leaves the row
``running``. The checkpoint is the authority on the run itself: a row that says ``running`` for a
run whose latest checkpoint is terminal is simply caught up.

**Leases.** The process running a run holds its lease: ``owner`` (this process's id) and
``lease_expires_at``, ``lease_seconds`` ahead. It renews the leases of the runs it executes; a
process that dies stops renewing, and once the lease has expired any process may claim the run
with one conditional ``UPDATE`` (on both engines only one such update can match the row, so one
process wins). A process that stops cleanly releases its leases, so others take over at once.
A process that was killed cannot release them, but when it is restarted on the same host (the
only process on an SQLite database, typically) it need not wait out its predecessor's lease:
:meth:`RunIndex.orphaned_here` finds the runs leased to an owner of this host whose process id
no longer exists, and :meth:`RunIndex.claim` takes them from that owner at once. (A pid reused
by an unrelated process only makes that run wait for its lease, as before.)
Times are the database's clock (``now`` below), never the processes', so hosts whose clocks
disagree still agree on whether a lease has expired.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable
from typing import Any

RUNNING = "running"
DEFAULT_LEASE_SECONDS = 15.0

# The database's clock, in unix seconds, per ``db.dialect``.
_NOW = {
    "postgres": "EXTRACT(EPOCH FROM clock_timestamp())::double precision",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_CLAIMABLE = "status = 'running' AND (owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < {now})"


def process_owner() -> str:
    """This process's lease owner id: ``<host>:<pid>:<random>`` (unique across restarts)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    except OSError:
        return True
    return True


class RunIndex:
    def __init__(
        self, db: Any, *, owner: str | None = None, lease_seconds: float = DEFAULT_LEASE_SECONDS
    ) -> None:
        self._db = db
        self.owner = owner or process_owner()
        self.lease_seconds = lease_seconds

    @property
    def _now(self) -> str:
        return _NOW.get(str(self._db.dialect), _NOW["sqlite"])

    async def add(
        self,
        run_id: str,
        agent: str,
        created_at: float,
        *,
        owner: str | None = None,
        tenant: str | None = None,
    ) -> None:
        """Index a new run of ``owner`` (the caller's subject, or None), leased to this process."""
        await self._db.execute(
            "INSERT INTO agent_runs (id, agent, status, created_at, updated_at, owner, lease_expires_at,"
            " subject, tenant) "
            f"VALUES ($1, $2, $3, $4, $4, $5, {self._now} + $6, $7, $8)",
            [run_id, agent, RUNNING, created_at, self.owner, self.lease_seconds, owner, tenant],
        )

    async def set_status(self, run_id: str, status: str) -> None:
        await self._db.execute(
            "UPDATE agent_runs SET status = $1, updated_at = $2 WHERE id = $3", [status, time.time(), run_id]
        )

    async def finished_before(self, cutoff: float, limit: int = 500) -> list[str]:
        """Ids of runs that ended (any status but ``running``) before ``cutoff`` (unix seconds)."""
        rows = await self._db.query(
            "SELECT id FROM agent_runs WHERE status <> 'running' AND updated_at < $1 "
            "ORDER BY updated_at LIMIT $2",
            [cutoff, limit],
        )
        return [str(row["id"]) for row in rows]

    async def remove(self, run_id: str) -> None:
        await self._db.execute("DELETE FROM agent_runs WHERE id = $1", [run_id])

    # -- leases --------------------------------------------------------------------------------

    async def claimable(self) -> list[tuple[str, str]]:
        """``(run id, agent)`` of the runs in flight that nobody holds a live lease on, oldest first."""
        rows = await self._db.query(
            f"SELECT id, agent FROM agent_runs WHERE {_CLAIMABLE.format(now=self._now)} ORDER BY created_at"
        )
        return [(str(row["id"]), str(row["agent"])) for row in rows]

    async def orphaned_here(self) -> list[tuple[str, str, str]]:
        """``(run id, agent, owner)`` of the runs in flight leased to a process of this host that
        no longer exists (it was killed), whatever their lease says."""
        rows = await self._db.query(
            "SELECT id, agent, owner FROM agent_runs WHERE status = 'running' AND owner IS NOT NULL "
            "AND owner <> $1 ORDER BY created_at",
            [self.owner],
        )
        host = socket.gethostname()
        found = []
        for row in rows:
            owner = str(row["owner"])
            owner_host, _, rest = owner.rpartition(":")[0].rpartition(":")
            if owner_host == host and rest.isdigit() and not _alive(int(rest)):
                found.append((str(row["id"]), str(row["agent"]), owner))
        return found

    async def claim(self, run_id: str, *, from_owner: str | None = None) -> bool:
        """Take the run's lease if it is still free or expired (or, with ``from_owner``, if that
        dead owner still holds it); True if this process now holds it."""
        now = self._now
        if from_owner is not None:
            taken = await self._db.execute(
                f"UPDATE agent_runs SET owner = $1, lease_expires_at = {now} + $2 "
                "WHERE id = $3 AND owner = $4 AND status = 'running'",
                [self.owner, self.lease_seconds, run_id, from_owner],
            )
            return bool(taken)
        taken = await self._db.execute(
            f"UPDATE agent_runs SET owner = $1, lease_expires_at = {now} + $2 "
            f"WHERE id = $3 AND {_CLAIMABLE.format(now=now)}",
            [self.owner, self.lease_seconds, run_id],
        )
        return bool(taken)

    async def renew(self, run_ids: Iterable[str]) -> set[str]:
        """Extend this process's leases on ``run_ids``; the ones it still holds (the others were
        taken over, or ended elsewhere)."""
        ids = list(run_ids)
        if not ids:
            return set()
        marks = ", ".join(f"${n}" for n in range(3, len(ids) + 3))
        await self._db.execute(
            f"UPDATE agent_runs SET lease_expires_at = {self._now} + $1 "
            f"WHERE owner = $2 AND status = 'running' AND id IN ({marks})",
            [self.lease_seconds, self.owner, *ids],
        )
        marks = ", ".join(f"${n}" for n in range(2, len(ids) + 2))
        rows = await self._db.query(
            f"SELECT id FROM agent_runs WHERE owner = $1 AND status = 'running' AND id IN ({marks})",
            [self.owner, *ids],
        )
        return {str(row["id"]) for row in rows}

    async def release(self, run_ids: Iterable[str] | None = None) -> None:
        """Give up this process's leases (on ``run_ids``, or all): others may take those runs now."""
        if run_ids is None:
            await self._db.execute(
                "UPDATE agent_runs SET owner = NULL, lease_expires_at = NULL WHERE owner = $1", [self.owner]
            )
            return
        for run_id in run_ids:
            await self._db.execute(
                "UPDATE agent_runs SET owner = NULL, lease_expires_at = NULL WHERE owner = $1 AND id = $2",
                [self.owner, run_id],
            )

    # -- reading -------------------------------------------------------------------------------

    async def recent(
        self, limit: int, agent: str | None = None, *, subject: str | None = None, everyone: bool = True
    ) -> list[dict[str, Any]]:
        """The newest runs, of ``agent`` if given; only ``subject``'s own unless ``everyone``."""
        where: list[str] = []
        args: list[Any] = []
        if agent is not None:
            args.append(agent)
            where.append(f"agent = ${len(args)}")
        if not everyone:
            args.append(subject)
            where.append(f"subject = ${len(args)}")
        args.append(limit)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        return await self._db.query(  # type: ignore[no-any-return]
            "SELECT id, agent, status, subject AS owner, tenant, created_at, updated_at FROM agent_runs "
            f"{clause}ORDER BY created_at DESC LIMIT ${len(args)}",
            args,
        )
