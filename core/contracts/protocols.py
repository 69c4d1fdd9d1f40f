"""``Ctx``: the part of a run's context that agents and capabilities read.

The runtime's ``RunContext`` sits above the contracts, so layers below it annotate the context
they receive with this structural protocol instead of importing it. ``RunContext`` satisfies it
by having the attributes; so does a test stub. Every member is a read-only property, so a plain
attribute satisfies it too.

``budget``, ``invoker`` and ``asker`` are typed ``Any``: their classes (``Budget``, ``Invoker``,
the human-in-the-loop transport) are runtime policy defined above this layer, and the contracts
deliberately know nothing of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from core.contracts.ports import CheckpointPort, ObserverPort, StorePort, TracePort, VectorPort
from core.contracts.types import Scope

__all__ = ["CancelSignal", "Ctx"]


@runtime_checkable
class CancelSignal(Protocol):
    """A cooperative abort shared down a run tree: a parent cancels, loops check at safe points."""

    @property
    def cancelled(self) -> bool: ...

    def cancel(self) -> None: ...

    def raise_if_cancelled(self) -> None: ...


@runtime_checkable
class Ctx(Protocol):
    """What a capability or an agent may read from the run it is part of."""

    @property
    def correlation_id(self) -> str:
        """The run's id: checkpoint keys and span attributes use it."""
        ...

    @property
    def scope(self) -> Scope:
        """The tenant the run belongs to."""
        ...

    @property
    def autonomy(self) -> str:
        """How freely the run may act (for example ``"auto"``, ``"gated"``, ``"manual"``)."""
        ...

    @property
    def budget(self) -> Any:
        """The run's ceilings and spend (the runtime's ``Budget``)."""
        ...

    @property
    def cancel(self) -> CancelSignal:
        """The run's cancellation token."""
        ...

    @property
    def trace(self) -> TracePort: ...

    @property
    def observer(self) -> ObserverPort: ...

    @property
    def store(self) -> StorePort | None: ...

    @property
    def vector(self) -> VectorPort | None: ...

    @property
    def checkpointer(self) -> CheckpointPort | None: ...

    @property
    def invoker(self) -> Any:
        """Runs chat and tool requests through the middleware chains (the runtime's ``Invoker``)."""
        ...

    @property
    def asker(self) -> Any:
        """The human-in-the-loop transport, or ``None``."""
        ...

    def check_cancelled(self) -> None:
        """Raise the cancellation error if the run has been cancelled."""
        ...

    async def emit(
        self,
        kind: str,
        render: str = "",
        *,
        payload: Mapping[str, Any] | None = None,
        agent: str = "",
        parent_id: str | None = None,
    ) -> None:
        """Publish an observation on the run's observer; never raises into the run."""
        ...
