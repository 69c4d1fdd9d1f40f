"""The runtime a run executes in: its context, the invoker that runs its calls, and its meters.

``RunContext``, ``InvokingContext`` and ``Services`` (``core.runtime.context``), ``Invoker``
(``core.runtime.invoker``), ``Budget`` / ``Quota`` / ``MeterExceeded`` (``core.runtime.meters``), the
production null objects (``core.runtime.null``), ``NullCtx`` and the shipped observers
(``core.runtime.observers``).
"""

from core.runtime.context import Autonomy, InvokingContext, RunContext, Services
from core.runtime.invoker import Invoker, InvokerNotConfigured
from core.runtime.meters import Budget, Meter, MeterExceeded, Quota
from core.runtime.null import (
    NoopMetrics,
    NoopObserver,
    NoopReplayStore,
    NoopSpan,
    NoopTrace,
    SystemClock,
)
from core.runtime.null_ctx import NullCtx
from core.runtime.observers import CollectingObserver

__all__ = [
    "Autonomy",
    "Budget",
    "CollectingObserver",
    "Invoker",
    "InvokingContext",
    "InvokerNotConfigured",
    "Meter",
    "MeterExceeded",
    "NoopMetrics",
    "NoopObserver",
    "NoopReplayStore",
    "NoopSpan",
    "NoopTrace",
    "NullCtx",
    "Quota",
    "RunContext",
    "Services",
    "SystemClock",
]
