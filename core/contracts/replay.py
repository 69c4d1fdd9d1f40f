"""``ReplayStorePort``: where a run's model and tool results are recorded so the run can be replayed.

A replay store keeps, per run (``run_id``, the correlation id) and per step (``key``, for example
the stable hash of a request), the JSON-like result that step produced. A recorder writes each
result as the run makes it; a replaying run reads them back instead of calling the model or the
tool again, so a past run can be re-driven deterministically for a test or a bug report.

The shipped default is ``core.runtime.NoopReplayStore``: it records nothing and finds nothing, so a
run with no replay store wired behaves exactly as a run with none (``Services()`` stays complete).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["ReplayStorePort"]


@runtime_checkable
class ReplayStorePort(Protocol):
    """Records and returns the results of a run's steps."""

    async def record(self, run_id: str, key: str, value: Any) -> None: ...

    async def lookup(self, run_id: str, key: str) -> Any | None: ...

    async def forget(self, run_id: str) -> None: ...
