"""Run managers on in-process stand-ins for their database and checkpoint store, shared by the tests
of the runs runtime and of what starts runs (triggers): the checkpoints in memory (their saves can
be made to fail), the ``agent_runs`` table as a dictionary, and a tool that never returns."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any, cast

from core.contracts.ports import Checkpoint
from core.contracts.types import ToolSchema
from core.errors import ToolUnavailableError
from core.runs.catalog import AgentCatalog
from core.runs.execution import RunServices
from core.runs.index import RunIndex
from core.runs.manager import RunManager, RunSettings
from core.runtime import NoopTrace
from core.state.stores import InMemoryCheckpointStore


class CheckpointsDown(ToolUnavailableError):
    """What the checkpoint tool raises while its database cannot be reached."""


class Checkpoints(InMemoryCheckpointStore):
    """In-memory checkpoints whose saves can be made to fail (``failure``), and back (``None``)."""

    def __init__(self) -> None:
        super().__init__()
        self.failure: Exception | None = None

    async def save(self, checkpoint: Checkpoint) -> None:
        if self.failure is not None:
            raise self.failure
        await super().save(checkpoint)


class Index:
    """The ``agent_runs`` table, shared by the "processes" of a test, each of which holds every lease
    it asks for. A run id is indexed once. A run is claimable once put in ``waiting`` (as a run whose
    process died is), or in ``orphans`` (``(run id, agent, owner)``: a killed process of this host
    holds it). ``taken`` names the runs whose lease another process took over, and ``failures`` makes
    a method raise (its name, the exception) as it would while the database is down."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {}
        self.updated: dict[str, float] = {}
        self.waiting: list[tuple[str, str]] = []
        self.orphans: list[tuple[str, str, str]] = []
        self.taken: set[str] = set()
        self.released: list[str] = []
        self.failures: dict[str, Exception] = {}

    def _fail(self, method: str) -> None:
        failure = self.failures.get(method)
        if failure is not None:
            raise failure

    async def add(
        self,
        run_id: str,
        agent: str,
        created_at: float,
        *,
        owner: str | None = None,
        tenant: str | None = None,
    ) -> None:
        self._fail("add")
        if run_id in self.status:
            raise RuntimeError(f"duplicate run id {run_id}")
        self.status[run_id] = "running"
        self.updated[run_id] = created_at

    async def set_status(self, run_id: str, status: str) -> None:
        self._fail("set_status")
        self.status[run_id] = status
        self.updated[run_id] = time.time()

    async def finished_before(self, cutoff: float, limit: int = 500) -> list[str]:
        ended = [r for r, s in self.status.items() if s != "running" and self.updated[r] < cutoff]
        return ended[:limit]

    async def remove(self, run_id: str) -> None:
        self.status.pop(run_id, None)
        self.updated.pop(run_id, None)

    async def claimable(self) -> list[tuple[str, str]]:
        self._fail("claimable")
        return list(self.waiting)

    async def orphaned_here(self) -> list[tuple[str, str, str]]:
        return list(self.orphans)

    async def claim(self, run_id: str, *, from_owner: str | None = None) -> bool:
        if from_owner is not None:
            found: list[Any] = [o for o in self.orphans if o[0] == run_id and o[2] == from_owner]
            pool: list[Any] = self.orphans
        else:
            found, pool = [w for w in self.waiting if w[0] == run_id], self.waiting
        for entry in found:
            pool.remove(entry)
        return bool(found)

    async def renew(self, run_ids: Iterable[str]) -> set[str]:
        self._fail("renew")
        return set(run_ids) - self.taken

    async def release(self, run_ids: Iterable[str] | None = None) -> None:
        self.released.extend(run_ids if run_ids is not None else ["*"])


class Gate:
    """A tool that never returns (until the run's task is cancelled)."""

    name = "wait_for_gate"
    side_effecting = False
    schema = ToolSchema("wait_for_gate", "Wait until the gate opens", {"type": "object"})

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def run(self, args: Any, ctx: Any) -> str:
        self.entered.set()
        await asyncio.Event().wait()
        return "never"


def run_manager(
    catalog: AgentCatalog,
    checkpoints: InMemoryCheckpointStore,
    index: Index,
    *,
    cancel_grace: float = 0.05,
    poll: float = 0.05,
    **settings: Any,
) -> RunManager:
    """A manager for ``catalog``'s agents over these stand-ins, quick to give up on a run (``cancel_grace``)
    and to look again (``poll``); ``settings`` are the other ``RunSettings``."""
    return RunManager(
        catalog=catalog,
        index=cast(RunIndex, index),
        services=RunServices(checkpoint=checkpoints, store=None, trace=NoopTrace()),
        settings=RunSettings(cancel_grace=cancel_grace, poll=poll, **settings),
    )
