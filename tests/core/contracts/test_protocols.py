"""Ctx and CancelSignal are structural: plain attributes, properties and the real token satisfy them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.contracts.protocols import CancelSignal, Ctx
from core.contracts.types import Scope
from core.execution.cancellation import CancellationToken


class StubCtx:
    """A test stub with plain attributes, the way a hand-written double would look."""

    def __init__(self) -> None:
        self.correlation_id = "run-42"
        self.scope = Scope(7, 2)
        self.autonomy = "manual"
        self.budget = None
        self.cancel = CancellationToken()
        self.trace: Any = None
        self.observer: Any = None
        self.store = None
        self.vector = None
        self.checkpointer = None
        self.invoker = None
        self.asker = None
        self.emitted: list[tuple[str, str]] = []

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
        self.emitted.append((kind, render))


def read_scope(ctx: Ctx) -> str:
    return ctx.scope.key()


async def test_a_stub_with_plain_attributes_satisfies_ctx() -> None:
    stub = StubCtx()
    assert isinstance(stub, Ctx)
    assert read_scope(stub) == "org7:dom2"
    await stub.emit("step", "planning", agent="analyst")
    assert stub.emitted == [("step", "planning")]


def test_an_object_missing_part_of_the_slice_is_not_a_ctx() -> None:
    stub = StubCtx()
    del stub.observer
    assert not isinstance(stub, Ctx)


def test_the_execution_cancellation_token_is_a_cancel_signal() -> None:
    token = CancellationToken()
    assert isinstance(token, CancelSignal)
    token.cancel()
    assert token.cancelled
