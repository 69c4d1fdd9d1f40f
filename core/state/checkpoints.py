"""``InMemoryCheckpointStore``: an in-process ``CheckpointPort``.

One producer owns a ``run_id`` and numbers its snapshots; this store keeps every version and enforces
the numbering: versions start at 1 and strictly increase per run, so a save whose version is not
above the run's latest raises ``CheckpointVersionConflict`` (two producers sharing a run id collide
loudly instead of overwriting each other). ``latest`` and ``at_version`` return ``None`` when there is
nothing to return; ``list_versions`` is ascending; ``delete`` removes every version of a run and is
idempotent. Checkpoints are frozen values, so storing the object itself is safe.
"""

from __future__ import annotations

from core.contracts.errors import KeelError
from core.contracts.ports import Checkpoint

__all__ = ["CheckpointVersionConflict", "InMemoryCheckpointStore"]


class CheckpointVersionConflict(KeelError):
    """A checkpoint's version is not above the run's latest (or is below 1)."""


class InMemoryCheckpointStore:
    """A ``CheckpointPort`` held in memory: every version of every run."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[int, Checkpoint]] = {}

    async def save(self, checkpoint: Checkpoint) -> None:
        if checkpoint.version < 1:
            raise CheckpointVersionConflict(
                f"run {checkpoint.run_id!r}: versions start at 1, got {checkpoint.version}"
            )
        versions = self._runs.setdefault(checkpoint.run_id, {})
        if versions:
            latest = max(versions)
            if checkpoint.version <= latest:
                raise CheckpointVersionConflict(
                    f"run {checkpoint.run_id!r}: version {checkpoint.version} is not above the latest "
                    f"saved version {latest}"
                )
        versions[checkpoint.version] = checkpoint

    async def latest(self, run_id: str) -> Checkpoint | None:
        versions = self._runs.get(run_id)
        return versions[max(versions)] if versions else None

    async def at_version(self, run_id: str, version: int) -> Checkpoint | None:
        return self._runs.get(run_id, {}).get(version)

    async def list_versions(self, run_id: str) -> list[int]:
        return sorted(self._runs.get(run_id, {}))

    async def delete(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
