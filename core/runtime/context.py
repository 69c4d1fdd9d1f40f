"""The frame a run executes in: ``RunContext`` and the ``Services`` it shares with other runs.

A ``RunContext`` carries the run's identity (``correlation_id``, ``scope``, ``autonomy``, ``depth``),
its meters (the ``budget`` always, plus any extra ``meters`` such as a tenant ``Quota``), its
cancellation token, and ``services``: the process-wide collaborators (invoker, store, vector index,
checkpointer, human-in-the-loop asker, tracer, observer, metrics, clock). Agents and middlewares read
``ctx.invoker``, ``ctx.trace``, ``ctx.store`` and so on; a ``RunContext`` satisfies the ``Ctx``
protocol of ``core.contracts.protocols``.

``Services()`` with no arguments is complete: the tracer, observer, metrics and replay store default
to the no-op objects of ``core.runtime.null`` and the clock to the system clock, built by factories
so no two ``Services`` share one. ``invoker``, ``store``, ``vector``, ``checkpointer`` and ``asker`` stay
``None`` until wired: a missing store must read as missing, not as an empty one.

``InvokingContext`` is a ``RunContext`` whose services carry an ``Invoker``, checked when it is built,
so its ``ctx.invoker`` is an ``Invoker`` and never ``None``. Code that calls models or tools through the
invoker takes one, and the type checker, not a ``None`` test at every call, says the invoker is there.

``emit`` never raises into the run: an observer that fails is logged and the run goes on.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Self

from core.contracts.ports import (
    CheckpointPort,
    ClockPort,
    MetricsPort,
    Observation,
    ObserverPort,
    StorePort,
    TracePort,
    VectorPort,
)
from core.contracts.replay import ReplayStorePort
from core.contracts.types import Scope
from core.execution.cancellation import CancellationToken
from core.runtime.meters import Budget, Meter
from core.runtime.null import NoopMetrics, NoopObserver, NoopReplayStore, NoopTrace, SystemClock

if TYPE_CHECKING:
    from core.runtime.invoker import Invoker

__all__ = ["Autonomy", "InvokingContext", "RunContext", "Services"]

_log = logging.getLogger(__name__)


class Autonomy(StrEnum):
    """How freely a run may act: on its own, behind approval gates, or only when told."""

    AUTO = "auto"
    GATED = "gated"
    MANUAL = "manual"


def _new_correlation_id() -> str:
    return uuid.uuid4().hex


@dataclass(eq=False)
class Services:
    """Collaborators shared by every run of a process; the no-argument form is fully usable."""

    invoker: Invoker | None = None
    store: StorePort | None = None
    vector: VectorPort | None = None
    checkpointer: CheckpointPort | None = None
    asker: Any = None
    trace: TracePort = field(default_factory=NoopTrace)
    observer: ObserverPort = field(default_factory=NoopObserver)
    metrics: MetricsPort = field(default_factory=NoopMetrics)
    clock: ClockPort = field(default_factory=SystemClock)
    replay: ReplayStorePort = field(default_factory=NoopReplayStore)


@dataclass(eq=False)
class RunContext:
    """One run's identity, meters, cancellation and services."""

    scope: Scope = field(default_factory=Scope)
    budget: Budget = field(default_factory=Budget)
    services: Services = field(default_factory=Services)
    correlation_id: str = field(default_factory=_new_correlation_id)
    autonomy: str = Autonomy.AUTO
    cancel: CancellationToken = field(default_factory=CancellationToken)
    meters: list[Meter] = field(default_factory=list)
    depth: int = 0

    def __post_init__(self) -> None:
        # Accept the plain strings ("manual"); an unknown level is a wiring mistake, refused here.
        self.autonomy = Autonomy(self.autonomy)

    # ---- services, read through the context ----------------------------------------------------

    @property
    def invoker(self) -> Invoker | None:
        return self.services.invoker

    @property
    def store(self) -> StorePort | None:
        return self.services.store

    @property
    def vector(self) -> VectorPort | None:
        return self.services.vector

    @property
    def checkpointer(self) -> CheckpointPort | None:
        return self.services.checkpointer

    @property
    def asker(self) -> Any:
        return self.services.asker

    @property
    def trace(self) -> TracePort:
        return self.services.trace

    @property
    def observer(self) -> ObserverPort:
        return self.services.observer

    @property
    def metrics(self) -> MetricsPort:
        return self.services.metrics

    @property
    def clock(self) -> ClockPort:
        return self.services.clock

    @property
    def replay(self) -> ReplayStorePort:
        return self.services.replay

    @property
    def all_meters(self) -> list[Meter]:
        """Every meter a call is charged to: the budget first, then the extra meters."""
        return [self.budget, *self.meters]

    # ---- run control ---------------------------------------------------------------------------

    def check_cancelled(self) -> None:
        """A safe point: raise ``Cancelled`` if the run's token has been cancelled."""
        self.cancel.raise_if_cancelled()

    def child(self) -> Self:
        """A context for a sub-run: same identity, budget, meters and services; one level deeper.

        The child's token is a child of this one, so cancelling the parent reaches the child but a
        child cancelling itself does not stop its siblings. The child is of this context's class, so
        the child of an ``InvokingContext`` still has its invoker.
        """
        return replace(self, cancel=self.cancel.child(), depth=self.depth + 1)

    async def emit(
        self,
        kind: str,
        render: str = "",
        *,
        payload: Mapping[str, Any] | None = None,
        agent: str = "",
        parent_id: str | None = None,
    ) -> None:
        """Publish an observation on the run's observer; a failing observer never breaks the run."""
        observation = Observation(
            kind=kind,
            render=render,
            payload=payload,
            agent=agent,
            id=uuid.uuid4().hex,
            parent_id=parent_id,
            correlation_id=self.correlation_id,
            created_at=self.services.clock.now(),
        )
        try:
            await self.services.observer.emit(observation)
        except Exception:
            _log.warning("observer failed to take a %r observation; the run continues", kind, exc_info=True)


@dataclass(eq=False)
class InvokingContext(RunContext):
    """A ``RunContext`` that is refused at construction unless its services carry an ``Invoker``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.services.invoker is None:
            raise ValueError(
                "InvokingContext needs services.invoker: it is the context of a run that calls models "
                "or tools (build a plain RunContext for one that does not)"
            )

    @property
    def invoker(self) -> Invoker:
        invoker = self.services.invoker
        if invoker is None:  # services was rewired after construction
            raise ValueError("InvokingContext: services.invoker was set to None after construction")
        return invoker
