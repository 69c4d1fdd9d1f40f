"""Coroutines that run as if each had a task of its own, without a task for those that never wait.

Most event handlers finish without waiting, and a task per delivery (created, scheduled, stepped,
finished) costs more than such a handler. :class:`InlineTasks` runs the coroutines queued while it
is idle in one task, each in its own copy of its submitter's context. The first that waits keeps
that task for the rest of its life, and the rest of the queue goes to a new task, so a slow one
holds up nobody and each coroutine runs in a single task from its start to its end (which
``asyncio.current_task()`` users, such as timeouts and task groups, rely on).

The in-process bus does the same in its ``_drain`` with no coroutine object per queued event, which
that hotter path needs; both use :func:`carry_on` and :func:`yield_once`.
"""

from __future__ import annotations

import asyncio
import types
from collections import deque
from collections.abc import Coroutine, Generator
from contextvars import Context, copy_context
from typing import Any


class InlineTasks:
    """``tasks`` holds every task this runs coroutines in until it ends, for a caller that must
    wait for them or cancel them when it stops (a cancelled task closes what it had not started)."""

    def __init__(self, tasks: set[asyncio.Task[Any]], name: str) -> None:
        self.tasks = tasks
        self._name = name
        self._queue: deque[tuple[Coroutine[Any, Any, Any], Context]] = deque()
        self._runner: asyncio.Task[None] | None = None

    def start(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` soon, in a copy of the current context. Nobody awaits it: an exception it
        lets out goes to the loop's exception handler, as that of a task nobody awaits would."""
        self._queue.append((coro, copy_context()))
        if self._runner is None:
            self._runner = self._spawn()

    def _spawn(self) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._run(), name=self._name)
        self.tasks.add(task)
        # A callback rather than a ``finally``: a task cancelled before its first step never runs one.
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if self._runner is task:  # cancelled while running the queue: what never started is closed
            self._runner = None
            while self._queue:
                self._queue.popleft()[0].close()

    async def _run(self) -> None:
        queue = self._queue
        while queue:
            for _ in range(len(queue)):  # only what was queued when the pass began
                coro, context = queue.popleft()
                try:
                    waiting = context.run(coro.send, None)
                except (StopIteration, asyncio.CancelledError):
                    # Finished, or cancelled itself (nobody can cancel this task mid-step): either
                    # way only that coroutine has ended, as only its own task would have.
                    continue
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:  # what its own task would have reported
                    _report(exc, coro)
                    continue
                # It waits: the rest goes to a new task, and this one carries it on.
                self._runner = self._spawn() if queue else None
                await carry_on(coro, context, waiting)
                return
            if queue:
                await yield_once()
        self._runner = None


def _report(exc: BaseException, coro: Coroutine[Any, Any, Any]) -> None:
    asyncio.get_running_loop().call_exception_handler(
        {"message": f"{getattr(coro, '__qualname__', coro)} failed", "exception": exc}
    )


@types.coroutine
def carry_on(coro: Coroutine[Any, Any, Any], context: Context, waiting: Any) -> Generator[Any, Any, Any]:
    """Go on running ``coro`` — started elsewhere, now waiting on ``waiting`` — in this task and
    in ``context``: what a task of its own would do, step for step.

    Each thing it waits on goes to the task as it is, and the task's answer (a wake-up, or an
    exception thrown in, such as a cancellation) goes back to it."""
    send, throw, run = coro.send, coro.throw, context.run
    while True:
        try:
            value = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting = run(throw, exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waiting = run(send, value)
            except StopIteration as stop:
                return stop.value


@types.coroutine
def yield_once() -> Generator[None, None, None]:
    """Let the loop run whatever else is ready (``asyncio.sleep(0)`` without its call)."""
    yield
