"""Behaviour of CancellationToken and Cancelled."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import pytest

from core.contracts.errors import ErrorClass, KeelError, classify
from core.execution.cancellation import CancellationToken, Cancelled


def test_a_new_token_is_not_cancelled_and_lets_work_continue() -> None:
    token = CancellationToken()
    assert not token.cancelled
    assert token.reason is None
    token.raise_if_cancelled()


def test_cancel_makes_safe_points_raise_cancelled_with_the_reason() -> None:
    token = CancellationToken()
    token.cancel("user pressed stop")
    assert token.cancelled
    with pytest.raises(Cancelled, match="user pressed stop") as info:
        token.raise_if_cancelled()
    assert info.value.reason == "user pressed stop"


def test_cancel_is_idempotent_and_the_first_reason_wins() -> None:
    token = CancellationToken()
    token.cancel("first")
    token.cancel("second")
    assert token.reason == "first"


def test_cancelled_is_a_keel_error_and_not_a_task_cancellation() -> None:
    assert issubclass(Cancelled, KeelError)
    assert not issubclass(Cancelled, asyncio.CancelledError)
    token = CancellationToken()
    token.cancel()
    caught = ""
    try:
        try:
            token.raise_if_cancelled()
        except asyncio.CancelledError:
            caught = "task cancellation"
    except KeelError:
        caught = "keel error"
    assert caught == "keel error"
    with pytest.raises(Cancelled, match="^cancelled$"):
        token.raise_if_cancelled()


def test_work_that_was_told_to_stop_is_not_worth_retrying() -> None:
    assert classify(Cancelled("stop")) is ErrorClass.PERMANENT


def test_cancelling_a_parent_reaches_every_descendant_with_its_reason() -> None:
    root = CancellationToken()
    child = root.child()
    grandchild = child.child()
    root.cancel("shutdown")
    assert child.cancelled and grandchild.cancelled
    assert grandchild.reason == "shutdown"


def test_cancelling_a_child_leaves_its_parent_and_siblings_running() -> None:
    root = CancellationToken()
    first, second = root.child(), root.child()
    first.cancel()
    assert first.cancelled
    assert not root.cancelled
    assert not second.cancelled


def test_a_child_of_a_cancelled_token_starts_cancelled() -> None:
    root = CancellationToken()
    root.cancel("too late")
    child = root.child()
    assert child.cancelled
    assert child.reason == "too late"


def test_a_parent_does_not_keep_forgotten_children_alive() -> None:
    root = CancellationToken()
    child = root.child()
    ref = weakref.ref(child)
    del child
    gc.collect()
    assert ref() is None
    root.cancel()


async def test_wait_returns_once_the_token_is_cancelled() -> None:
    token = CancellationToken()
    waiter = asyncio.create_task(token.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    token.cancel()
    await asyncio.wait_for(waiter, timeout=5)


async def test_wait_on_a_child_is_woken_by_the_parent() -> None:
    root = CancellationToken()
    child = root.child()
    waiter = asyncio.create_task(child.wait())
    await asyncio.sleep(0)
    root.cancel()
    await asyncio.wait_for(waiter, timeout=5)
    assert child.cancelled


async def test_wait_on_an_already_cancelled_token_returns_at_once() -> None:
    token = CancellationToken()
    token.cancel()
    waiting = token.wait()
    with pytest.raises(StopIteration):  # finished on its first step, without suspending
        waiting.send(None)


async def test_a_cancelled_waiter_propagates_its_cancellation_and_the_token_still_works() -> None:
    token = CancellationToken()
    waiter = asyncio.create_task(token.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    token.cancel()
    await asyncio.wait_for(token.wait(), timeout=5)


def test_a_token_cancelled_on_one_thread_wakes_a_waiter_on_another_threads_loop() -> None:
    token = CancellationToken()
    registered = threading.Event()
    woke: list[bool] = []

    async def wait_on_worker_loop() -> None:
        waiting = asyncio.ensure_future(token.wait())
        await asyncio.sleep(0)  # one step: the waiter is now registered
        registered.set()
        await waiting
        woke.append(True)

    worker = threading.Thread(target=asyncio.run, args=(wait_on_worker_loop(),))
    worker.start()
    assert registered.wait(timeout=5)
    token.cancel()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert woke == [True]
