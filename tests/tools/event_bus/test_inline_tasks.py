"""InlineTasks: coroutines run as if each had its own task, with a task only for those that wait."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import warnings
from typing import Any

import pytest

from tools.event_bus.inline_tasks import InlineTasks

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


async def test_coroutines_that_never_wait_share_one_task_and_the_set_empties() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    runner = InlineTasks(tasks, "test")
    ran: list[tuple[int, asyncio.Task[Any] | None]] = []

    async def quick(n: int) -> None:
        ran.append((n, asyncio.current_task()))

    for n in range(50):
        runner.start(quick(n))
    assert len(tasks) == 1
    (only,) = tasks
    await only
    assert [n for n, _ in ran] == list(range(50))
    assert {task for _, task in ran} == {only}
    assert tasks == set()


async def test_one_that_waits_keeps_its_task_and_holds_up_nobody() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    runner = InlineTasks(tasks, "test")
    release, quick_ran = asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}

    async def slow() -> None:
        seen["slow_start"] = asyncio.current_task()
        async with asyncio.timeout(5):  # a timeout needs one task from start to end
            await release.wait()
        seen["slow_end"] = asyncio.current_task()

    async def quick() -> None:
        seen["quick"] = asyncio.current_task()
        quick_ran.set()

    runner.start(slow())
    runner.start(quick())
    await quick_ran.wait()
    assert "slow_end" not in seen
    assert seen["quick"] is not seen["slow_start"]
    release.set()
    await asyncio.gather(*tasks)
    assert seen["slow_end"] is seen["slow_start"]
    assert tasks == set()


async def test_each_runs_in_its_own_copy_of_its_starters_context() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    runner = InlineTasks(tasks, "test")
    seen: list[str] = []

    async def sets_it() -> None:
        seen.append(marker.get())
        marker.set("leaked")

    marker.set("starter")
    runner.start(sets_it())
    runner.start(sets_it())
    await asyncio.gather(*tasks)
    assert seen == ["starter", "starter"]
    assert marker.get() == "starter"


async def test_an_exception_goes_to_the_loops_handler_and_the_rest_still_run() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    runner = InlineTasks(tasks, "test")
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    ran: list[str] = []

    async def broken() -> None:
        raise ValueError("boom")

    async def after() -> None:
        ran.append("after")

    try:
        runner.start(broken())
        runner.start(after())
        await asyncio.gather(*tasks)
    finally:
        loop.set_exception_handler(None)
    assert ran == ["after"]
    assert [type(c["exception"]) for c in reported] == [ValueError]
    assert "broken" in reported[0]["message"]


def test_system_exit_is_not_swallowed() -> None:
    """It leaves the loop, as it would from a task of its own (so a fresh loop, not the test's)."""

    async def exits() -> None:
        raise SystemExit(3)

    async def main() -> None:
        tasks: set[asyncio.Task[Any]] = set()
        InlineTasks(tasks, "test").start(exits())
        await asyncio.gather(*tasks)

    with pytest.raises(SystemExit):
        asyncio.run(main())


async def test_cancelled_before_it_ran_closes_what_never_started() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    runner = InlineTasks(tasks, "test")
    ran: list[int] = []

    async def quick(n: int) -> None:
        ran.append(n)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited"
        runner.start(quick(1))
        runner.start(quick(2))
        (task,) = tasks
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gc.collect()
    assert ran == []
    assert tasks == set()
    runner.start(quick(3))  # and it starts afresh after
    await asyncio.gather(*tasks)
    assert ran == [3]


async def test_one_that_cancels_itself_at_once_ends_alone() -> None:
    """A coroutine that raises CancelledError in its first step (a handler swallowing and
    re-raising a cancellation of its own) ends as its own task would: the rest still run."""
    tasks: set[asyncio.Task[Any]] = set()
    runner = InlineTasks(tasks, "test")
    ran: list[str] = []

    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    async def after() -> None:
        ran.append("after")

    runner.start(cancels_itself())
    runner.start(after())
    (task,) = tasks
    await task
    assert ran == ["after"]
    assert not task.cancelled()
