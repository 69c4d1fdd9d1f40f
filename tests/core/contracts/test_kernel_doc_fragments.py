"""The kernel document's three fragments (they use ``...`` or an undefined ``run_one``), completed so
they run, with their behaviour checked: the error boundary, ``StoreValueError`` on a document key,
and ``attempt_until_stuck`` stopping on a repeated failure signature."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from core.contracts.errors import KeelError, StoreUnavailable, StoreValueError
from core.execution.recurrence import Stuck, attempt_until_stuck
from core.state.stores import InMemoryStore


def test_one_error_boundary(capsys: pytest.CaptureFixture[str]) -> None:
    def handle(exc: Exception) -> None:
        try:
            raise exc
        except StoreUnavailable:
            print("store down: degrade")
        except KeelError:
            print("typed:", type(exc).__name__)

    handle(StoreUnavailable("redis unreachable"))
    handle(StoreValueError("not a counter", key="k"))
    assert capsys.readouterr().out.splitlines() == ["store down: degrade", "typed: StoreValueError"]


def test_increment_on_a_document_is_a_store_value_error(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        store = InMemoryStore()
        await store.set("ratelimit:user-7", {"a": "document"})
        try:
            remaining = await store.increment("ratelimit:user-7", 1, ttl=60)
            print(remaining)
        except StoreValueError:
            print("a counter and a document are sharing one key")

    asyncio.run(main())
    assert capsys.readouterr().out.splitlines() == ["a counter and a document are sharing one key"]


@dataclass
class Outcome:
    failure_signature: str | None


def test_attempt_until_stuck_escalates_on_a_cycle() -> None:
    signatures = iter(["A", "B", "A", "B"])
    calls: list[int] = []

    async def run_one() -> Outcome:
        calls.append(1)
        return Outcome(next(signatures))

    async def main() -> None:
        await attempt_until_stuck(
            lambda: run_one(),
            fingerprint=lambda outcome: outcome.failure_signature,
            on_repeat="escalate",  # or "stop"
            max_attempts=4,  # a backstop, not the bound
        )

    with pytest.raises(Stuck):
        asyncio.run(main())
    assert len(calls) == 3  # A, B, then A again: a cycle, not progress
