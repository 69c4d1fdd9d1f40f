"""What every ``checkpoint`` backend implements, and the row shape they share.

A backend stores rows ``(run_id, version, state, created_at, status)`` with ``state`` as JSON text.
``save`` must be atomic with respect to other producers of the same run: check that the version is
above the run's latest, insert it, and drop the versions beyond the newest ``keep`` (``0`` keeps
all), all in one transaction; a version that is not above the latest raises
:class:`~tools.checkpoint.errors.CheckpointConflict`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from core.contracts.ports import Checkpoint, CheckpointStatus

from .errors import CheckpointEncodeError

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Row:
    version: int
    state: str
    created_at: float
    status: str

    def checkpoint(self, run_id: str) -> Checkpoint:
        status = CheckpointStatus(self.status)
        return Checkpoint(run_id, self.version, json.loads(self.state), self.created_at, status)


class Backend(Protocol):
    def describe(self) -> str: ...
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> bool: ...
    async def save(self, run_id: str, row: Row, keep: int) -> None: ...
    async def latest(self, run_id: str) -> Row | None: ...
    async def at_version(self, run_id: str, version: int) -> Row | None: ...
    async def list_versions(self, run_id: str) -> list[int]: ...
    async def delete(self, run_id: str) -> None: ...


def encode_state(checkpoint: Checkpoint) -> str:
    try:
        return _ENCODER.encode(checkpoint.state)
    except (TypeError, ValueError) as exc:
        raise CheckpointEncodeError(
            f"run {checkpoint.run_id!r} version {checkpoint.version}: the state is not a JSON document: {exc}"
        ) from None


def row_of(checkpoint: Checkpoint) -> Row:
    return Row(
        checkpoint.version, encode_state(checkpoint), float(checkpoint.created_at), str(checkpoint.status)
    )


def as_row(record: Any) -> Row:
    return Row(int(record[0]), str(record[1]), float(record[2]), str(record[3]))
