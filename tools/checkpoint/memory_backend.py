"""``memory://``: checkpoints held in this process, with the reference store's rules plus retention.

Like ``core.state.stores.InMemoryCheckpointStore`` (versions from 1, strictly increasing per run,
``CheckpointConflict`` otherwise), but each state is kept as the JSON text the database backends
keep, so a state reads back exactly as it would from SQLite or PostgreSQL, and ``keep`` drops old
versions the same way. Nothing survives the process.
"""

from __future__ import annotations

from .backend import Row
from .errors import CheckpointConflict


class MemoryBackend:
    def __init__(self) -> None:
        self._runs: dict[str, dict[int, Row]] = {}

    def describe(self) -> str:
        return "in-process memory (nothing survives a restart)"

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        self._runs.clear()

    async def ping(self) -> bool:
        return True

    async def save(self, run_id: str, row: Row, keep: int) -> None:
        versions = self._runs.get(run_id, {})
        latest = max(versions) if versions else None
        if row.version < 1 or (latest is not None and row.version <= latest):
            raise CheckpointConflict(run_id, row.version, latest)
        versions[row.version] = row
        self._runs[run_id] = versions
        if keep and len(versions) > keep:
            for old in sorted(versions)[:-keep]:
                del versions[old]

    async def latest(self, run_id: str) -> Row | None:
        versions = self._runs.get(run_id)
        return versions[max(versions)] if versions else None

    async def at_version(self, run_id: str, version: int) -> Row | None:
        return self._runs.get(run_id, {}).get(version)

    async def list_versions(self, run_id: str) -> list[int]:
        return sorted(self._runs.get(run_id, {}))

    async def delete(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
