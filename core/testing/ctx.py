"""``make_test_ctx``, the one context factory for tests, and ``FakeCtx``.

``make_test_ctx`` is not a fake: it builds a real ``RunContext`` with real ``Services`` and a real
``Invoker``, so the code under test runs the production path and only the ports are doubles. Every
knob is a keyword argument with a safe default.

Its rules:

* ``llm=`` is wrapped in ``Invoker(llm=..., chat_middleware=..., tool_middleware=...)``;
  ``invoker=`` is used as built. Passing both is a ``ValueError``, and so is passing middleware
  together with ``invoker=`` (the middleware would otherwise be silently ignored). Either way the
  context is an ``InvokingContext``, so a test calls ``ctx.invoker.chat(...)`` with no ``None`` check.
* With neither, ``services.invoker`` is ``None``: right for tests that never call a model; running
  an agent on it fails on the missing invoker. Middleware with neither is a ``ValueError``: it
  would have no chain to sit in (``FakeLLM()`` will do for a test that only runs tools).
* ``observer=``, ``trace=``, ``metrics=`` and ``clock=`` are passed to ``Services`` only when set.
  Forwarding ``None`` would replace the no-op defaults and break every ``ctx.trace.span(...)``.
* ``correlation_id`` defaults to ``"test-run"`` so assertions on it are stable.

``FakeCtx`` is ``NullCtx`` plus a ``RecordingTracer``: it absorbs everything else and keeps the
spans, readable as ``.spans``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict, Unpack, overload

from core.contracts.middleware import Middleware
from core.contracts.ports import (
    CheckpointPort,
    ClockPort,
    LLMPort,
    MetricsPort,
    ObserverPort,
    StorePort,
    TracePort,
    VectorPort,
)
from core.contracts.types import Scope
from core.execution.cancellation import CancellationToken
from core.runtime.context import InvokingContext, RunContext, Services
from core.runtime.invoker import Invoker
from core.runtime.meters import Budget, Meter
from core.runtime.null_ctx import NullCtx
from core.testing.tracing import RecordingSpan, RecordingTracer

__all__ = ["FakeCtx", "make_test_ctx"]


class _Parts(TypedDict, total=False):
    """``make_test_ctx``'s keywords other than ``llm=`` / ``invoker=``, spelled once for its overloads."""

    scope: Scope | None
    budget: Budget | None
    store: StorePort | None
    vector: VectorPort | None
    checkpointer: CheckpointPort | None
    asker: Any
    observer: ObserverPort | None
    trace: TracePort | None
    metrics: MetricsPort | None
    clock: ClockPort | None
    cancel: CancellationToken | None
    chat_middleware: Sequence[Middleware]
    tool_middleware: Sequence[Middleware]
    meters: Sequence[Meter]
    correlation_id: str
    autonomy: str


@overload
def make_test_ctx(*, llm: LLMPort, invoker: None = None, **parts: Unpack[_Parts]) -> InvokingContext: ...


@overload
def make_test_ctx(*, llm: None = None, invoker: Invoker, **parts: Unpack[_Parts]) -> InvokingContext: ...


@overload
def make_test_ctx(
    *, llm: LLMPort | None = None, invoker: Invoker | None = None, **parts: Unpack[_Parts]
) -> RunContext: ...


def make_test_ctx(
    *,
    llm: LLMPort | None = None,
    invoker: Invoker | None = None,
    scope: Scope | None = None,
    budget: Budget | None = None,
    store: StorePort | None = None,
    vector: VectorPort | None = None,
    checkpointer: CheckpointPort | None = None,
    asker: Any = None,
    observer: ObserverPort | None = None,
    trace: TracePort | None = None,
    metrics: MetricsPort | None = None,
    clock: ClockPort | None = None,
    cancel: CancellationToken | None = None,
    chat_middleware: Sequence[Middleware] = (),
    tool_middleware: Sequence[Middleware] = (),
    meters: Sequence[Meter] = (),
    correlation_id: str = "test-run",
    autonomy: str = "auto",
) -> RunContext:
    """A real ``RunContext`` wired from the given parts; see the module notes for the rules."""
    if llm is not None and invoker is not None:
        raise ValueError("make_test_ctx takes llm= or invoker=, not both")
    if invoker is not None and (chat_middleware or tool_middleware):
        raise ValueError(
            "make_test_ctx: chat_middleware= / tool_middleware= are wired into the Invoker built from "
            "llm=; with invoker= they would be ignored, so build them into that Invoker instead"
        )
    if llm is not None:
        invoker = Invoker(llm=llm, chat_middleware=chat_middleware, tool_middleware=tool_middleware)
    elif invoker is None and (chat_middleware or tool_middleware):
        raise ValueError(
            "make_test_ctx: middleware needs an Invoker to live in; pass llm= as well "
            "(FakeLLM() will do for a test that only runs tools)"
        )

    optional: dict[str, Any] = {}
    if observer is not None:
        optional["observer"] = observer
    if trace is not None:
        optional["trace"] = trace
    if metrics is not None:
        optional["metrics"] = metrics
    if clock is not None:
        optional["clock"] = clock
    services = Services(
        invoker=invoker,
        store=store,
        vector=vector,
        checkpointer=checkpointer,
        asker=asker,
        **optional,
    )
    context = InvokingContext if invoker is not None else RunContext
    return context(
        scope=scope if scope is not None else Scope(),
        budget=budget if budget is not None else Budget(),
        services=services,
        correlation_id=correlation_id,
        autonomy=autonomy,
        cancel=cancel if cancel is not None else CancellationToken(),
        meters=list(meters),
    )


class FakeCtx(NullCtx):
    """A ``NullCtx`` whose tracer records: ``.spans`` lists the spans opened through it."""

    def __init__(self, *, scope: Scope | None = None, correlation_id: str = "fake") -> None:
        super().__init__(scope=scope, correlation_id=correlation_id)
        self.tracer = RecordingTracer()
        self.trace = self.tracer

    @property
    def spans(self) -> list[RecordingSpan]:
        return self.tracer.spans
