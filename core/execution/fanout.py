"""Structured, bounded fan-out: run awaitables concurrently, keep their order, never wedge an abort.

:func:`gather_bounded` is all-or-nothing: the first failing slot cancels its siblings and the failures
surface together as an exception group. :func:`gather_best_effort` runs every slot to the end and hands
back, slot by slot, either the result or a :class:`~core.contracts.errors.Failure`. Both take an optional
bound on concurrency (``sem``): ``None`` for unbounded, an ``int``, or a shared ``asyncio.Semaphore``
(share one to bound several fan-outs together).

The semantics are ``asyncio.TaskGroup``'s: every child is a task of the caller's loop with a copy of the
caller's context (so the active span and correlation id follow), no child outlives the call except as
described below, results keep input order, and failures arrive as an ``ExceptionGroup``. The loop is our
own (``create_task`` plus a completion callback) rather than a bare ``TaskGroup`` for one reason: a
``TaskGroup`` waits without limit for cancelled children, so one child that swallows
``CancelledError`` wedges the abort, and no outer timeout can break in. Here an abort cancels the
unfinished children and waits at most ``cleanup_grace`` seconds (:data:`SIBLING_CLEANUP_GRACE_S` by
default) for their ``finally`` blocks; a child still running after that is abandoned — kept referenced
until it ends, its outcome retrieved, a warning logged — and the abort proceeds. The grace is for
cleanup (releasing a semaphore, flushing a span), not a deadline for work.

Choices made where the specification leaves room:

* A child that ends cancelled although the fan-out did not cancel it counts as a failure of its slot,
  reported as :class:`~core.execution.cancellation.Cancelled` (never as a bare ``CancelledError``,
  which would read as the caller's own cancellation).
* Errors a child raises while being cancelled are reported in the group alongside the one that
  triggered the abort, as ``TaskGroup`` does.
* When the caller itself is cancelled, the children are cancelled and given the same grace, and the
  caller's ``CancelledError`` propagates; the children's errors are retrieved and dropped.
* A coroutine that never started (cancelled while waiting for the semaphore) is closed, so it does
  not warn that it was never awaited.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, Final, TypeVar

from core.contracts.errors import Failure
from core.execution.cancellation import Cancelled

__all__ = ["SIBLING_CLEANUP_GRACE_S", "gather_best_effort", "gather_bounded"]

T = TypeVar("T")

SIBLING_CLEANUP_GRACE_S: Final[float] = 5.0
"""How long an aborting fan-out waits for cancelled siblings to finish their cleanup, in seconds."""

_logger = logging.getLogger(__name__)

# Abandoned children are still running; the loop holds tasks only weakly, so keep them alive here.
_abandoned: set[asyncio.Task[Any]] = set()


def _semaphore(sem: int | asyncio.Semaphore | None) -> asyncio.Semaphore | None:
    if sem is None or isinstance(sem, asyncio.Semaphore):
        return sem
    if isinstance(sem, bool) or not isinstance(sem, int) or sem < 1:
        raise ValueError(f"sem must be None, a positive int or an asyncio.Semaphore, not {sem!r}")
    return asyncio.Semaphore(sem)


def _slot_name(index: int) -> str:
    return f"slot[{index}]"


async def _run_slot(awaitable: Awaitable[T], sem: asyncio.Semaphore | None) -> T:
    if sem is None:
        return await awaitable
    async with sem:
        return await awaitable


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _abandon(tasks: Iterable[asyncio.Task[Any]], grace: float) -> None:
    for task in tasks:
        _logger.warning(
            "fan-out child %s still running %.3gs after cancellation; abandoning it", task.get_name(), grace
        )
        _abandoned.add(task)
        task.add_done_callback(_abandoned.discard)
        task.add_done_callback(_retrieve)


async def _cancel_and_wait(tasks: Sequence[asyncio.Task[Any]], grace: float) -> set[asyncio.Task[Any]]:
    """Cancel unfinished tasks and wait up to ``grace`` for them; return the set that was cancelled."""
    unfinished = [task for task in tasks if not task.done()]
    for task in unfinished:
        task.cancel()
    if not unfinished:
        return set()
    try:
        await asyncio.wait(unfinished, timeout=grace)
    finally:
        # Reached after the grace, or early when the caller is cancelled again mid-wait.
        _abandon([task for task in unfinished if not task.done()], grace)
    return set(unfinished)


def _close_unstarted(awaitables: Sequence[Awaitable[Any]], tasks: Sequence[asyncio.Task[Any]]) -> None:
    for awaitable, task in zip(awaitables, tasks, strict=False):
        if (
            task.done()
            and inspect.iscoroutine(awaitable)
            and inspect.getcoroutinestate(awaitable) == inspect.CORO_CREATED
        ):
            awaitable.close()


async def _fan_out(
    awaitables: Sequence[Awaitable[T]],
    sem: int | asyncio.Semaphore | None,
    grace: float,
    *,
    stop_on_failure: bool,
) -> tuple[list[asyncio.Task[T]], set[asyncio.Task[Any]]]:
    """Run every awaitable as a task; return the tasks and the ones this call cancelled."""
    try:
        if grace < 0:
            raise ValueError(f"cleanup_grace must be >= 0, not {grace!r}")
        semaphore = _semaphore(sem)
    except ValueError:
        for awaitable in awaitables:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # refused before starting: do not leave them to warn "never awaited"
        raise
    loop = asyncio.get_running_loop()
    settled: asyncio.Future[None] = loop.create_future()
    remaining = len(awaitables)

    def on_done(task: asyncio.Task[T]) -> None:
        nonlocal remaining
        remaining -= 1
        # Reading the outcome here also marks every child's exception as retrieved.
        failed = task.cancelled() or task.exception() is not None
        if not settled.done() and (remaining == 0 or (stop_on_failure and failed)):
            settled.set_result(None)

    tasks = [
        loop.create_task(_run_slot(aw, semaphore), name=f"fan-out {_slot_name(index)}")
        for index, aw in enumerate(awaitables)
    ]
    for task in tasks:
        task.add_done_callback(on_done)
    try:
        try:
            if tasks:
                await settled
        except asyncio.CancelledError:
            # The caller is being cancelled: give the children the same bounded grace, then propagate.
            await _cancel_and_wait(tasks, grace)
            raise
        return tasks, await _cancel_and_wait(tasks, grace)
    finally:
        _close_unstarted(awaitables, tasks)


def _slot_error(
    task: asyncio.Task[Any], index: int, cancelled_here: set[asyncio.Task[Any]]
) -> BaseException | None:
    if not task.done():
        return None  # abandoned after the grace: it has no outcome yet
    if task.cancelled():
        if task in cancelled_here:
            return None
        return Cancelled(f"{_slot_name(index)} was cancelled by something other than the fan-out")
    return task.exception()


async def gather_bounded(
    awaitables: Iterable[Awaitable[T]],
    sem: int | asyncio.Semaphore | None = None,
    *,
    cleanup_grace: float = SIBLING_CLEANUP_GRACE_S,
) -> list[T]:
    """Await every awaitable concurrently and return their results in input order.

    The first failure cancels the siblings still running (waiting at most ``cleanup_grace`` seconds for
    them) and raises an ``ExceptionGroup`` holding every slot's error, in slot order.
    """
    slots = list(awaitables)
    tasks, cancelled_here = await _fan_out(slots, sem, cleanup_grace, stop_on_failure=True)
    errors = [
        error
        for index, task in enumerate(tasks)
        if (error := _slot_error(task, index, cancelled_here)) is not None
    ]
    if errors:
        raise BaseExceptionGroup(f"{len(errors)} of {len(tasks)} fan-out slots failed", errors)
    return [task.result() for task in tasks]


async def gather_best_effort(
    awaitables: Iterable[Awaitable[T]],
    sem: int | asyncio.Semaphore | None = None,
    *,
    cleanup_grace: float = SIBLING_CLEANUP_GRACE_S,
) -> list[T | Failure]:
    """Await every awaitable concurrently; each slot, in input order, is its result or a ``Failure``.

    A failed slot is described by ``Failure.from_exception`` with ``source`` ``"slot[i]"``. Only the
    caller's own cancellation aborts the batch (bounded by ``cleanup_grace``, as in
    :func:`gather_bounded`).
    """
    slots = list(awaitables)
    tasks, cancelled_here = await _fan_out(slots, sem, cleanup_grace, stop_on_failure=False)
    outcomes: list[T | Failure] = []
    for index, task in enumerate(tasks):
        error = _slot_error(task, index, cancelled_here)
        if error is None:
            outcomes.append(task.result())
        else:
            outcomes.append(Failure.from_exception(error, source=_slot_name(index)))
    return outcomes
