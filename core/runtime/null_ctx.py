"""``NullCtx``: a context that absorbs every operation and records nothing.

For code that needs a ``Ctx`` but has no run around it (a capability called from a script, a tool
exercised on its own). Spans open and close on a no-op tracer, observations vanish, the token is
never cancelled and no services are wired. ``core.testing.FakeCtx`` is the same thing except that it
records the spans, for a test that asserts on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.contracts.ports import CheckpointPort, ObserverPort, StorePort, TracePort, VectorPort
from core.contracts.types import Scope
from core.execution.cancellation import CancellationToken
from core.runtime.meters import Budget
from core.runtime.null import NoopObserver, NoopTrace

__all__ = ["NullCtx"]


class NullCtx:
    """A ``Ctx`` with nothing behind it: the zero tenant, an unlimited budget, no services."""

    def __init__(self, *, scope: Scope | None = None, correlation_id: str = "null") -> None:
        self.scope = scope if scope is not None else Scope()
        self.correlation_id = correlation_id
        self.autonomy = "auto"
        self.budget = Budget()
        self.cancel = CancellationToken()
        self.meters: list[Any] = []
        self.trace: TracePort = NoopTrace()
        self.observer: ObserverPort = NoopObserver()
        self.store: StorePort | None = None
        self.vector: VectorPort | None = None
        self.checkpointer: CheckpointPort | None = None
        self.invoker: Any = None
        self.asker: Any = None

    @property
    def all_meters(self) -> list[Any]:
        return [self.budget, *self.meters]

    def check_cancelled(self) -> None:
        self.cancel.raise_if_cancelled()

    async def emit(
        self,
        kind: str,
        render: str = "",
        *,
        payload: Mapping[str, Any] | None = None,
        agent: str = "",
        parent_id: str | None = None,
    ) -> None:
        return None
