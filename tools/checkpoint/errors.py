"""The errors the ``checkpoint`` tool raises.

A save that would not move its run forward raises ``core.state.stores.CheckpointVersionConflict``,
the same type the in-process reference store raises, on every backend: a caller (the agents
domain, say) catches one type whatever ``CHECKPOINT_URL`` points at. The tool raises it as
:class:`CheckpointConflict`, which adds ``run_id``, the version that was refused and the run's
latest version, so a producer that lost a race can tell how far the winner got.

A database that cannot be reached is :class:`CheckpointUnavailableError`, a
``ToolUnavailableError`` (the proxy marks the tool DEAD until a call succeeds). A state that is not
a JSON document is refused with :class:`CheckpointEncodeError` before anything is written.
"""

from __future__ import annotations

from core.contracts.errors import ErrorClass
from core.errors import KeelError, ToolUnavailableError
from core.state.stores import CheckpointVersionConflict


class CheckpointConflict(CheckpointVersionConflict):
    """A save based on a stale (or invalid) version: another producer has moved the run on."""

    caller_error = True
    error_class = ErrorClass.PERMANENT

    def __init__(self, run_id: str, version: int, latest: int | None) -> None:
        if version < 1:
            message = f"run {run_id!r}: versions start at 1, got {version}"
        else:
            message = f"run {run_id!r}: version {version} is not above the latest saved version {latest}"
        super().__init__(message)
        self.run_id = run_id
        self.version = version
        self.latest = latest


class CheckpointUnavailableError(ToolUnavailableError):
    """The checkpoint database cannot be reached or used."""

    error_class = ErrorClass.TRANSIENT


class CheckpointEncodeError(KeelError, TypeError):
    """A checkpoint's state is not a JSON document."""

    caller_error = True
    error_class = ErrorClass.PERMANENT
