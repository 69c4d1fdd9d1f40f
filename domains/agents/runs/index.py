"""The ``agent_runs`` table (``migrations/agents``): which runs exist, and which may need work.

A run's state is its checkpoints; this table only lets a process that boots find the runs that
were in flight when the previous one stopped (a checkpoint store cannot be listed). Rows are
written when a run starts and updated when it ends; a process that dies in between leaves the row
``running``, which is exactly what the next boot looks for. The checkpoint is the authority: a row
that says ``running`` for a run whose latest checkpoint is terminal is simply caught up.
"""

from __future__ import annotations

import time
from typing import Any

RUNNING = "running"


class RunIndex:
    def __init__(self, db: Any) -> None:
        self._db = db

    async def add(self, run_id: str, agent: str, created_at: float) -> None:
        await self._db.execute(
            "INSERT INTO agent_runs (id, agent, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
            [run_id, agent, RUNNING, created_at],
        )

    async def set_status(self, run_id: str, status: str) -> None:
        await self._db.execute(
            "UPDATE agent_runs SET status = $1, updated_at = $2 WHERE id = $3", [status, time.time(), run_id]
        )

    async def remove(self, run_id: str) -> None:
        await self._db.execute("DELETE FROM agent_runs WHERE id = $1", [run_id])

    async def in_flight(self) -> list[str]:
        rows = await self._db.query(
            "SELECT id FROM agent_runs WHERE status = $1 ORDER BY created_at", [RUNNING]
        )
        return [str(row["id"]) for row in rows]

    async def recent(self, limit: int, agent: str | None = None) -> list[dict[str, Any]]:
        if agent is None:
            return await self._db.query(  # type: ignore[no-any-return]
                "SELECT id, agent, status, created_at, updated_at FROM agent_runs "
                "ORDER BY created_at DESC LIMIT $1",
                [limit],
            )
        return await self._db.query(  # type: ignore[no-any-return]
            "SELECT id, agent, status, created_at, updated_at FROM agent_runs WHERE agent = $1 "
            "ORDER BY created_at DESC LIMIT $2",
            [agent, limit],
        )
