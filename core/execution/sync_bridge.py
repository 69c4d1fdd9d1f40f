"""The one bridge from synchronous code to a coroutine: :func:`run_sync`.

With no event loop running in the calling thread it is ``asyncio.run``. With one running (sync code
called from inside async code) ``asyncio.run`` would refuse, so the coroutine runs under
``asyncio.run`` on a fresh worker thread while the caller blocks for the outcome. The caller's
context variables are copied into that thread, so a correlation id or active span carries over.

What the second path costs: the calling thread, and therefore its event loop, is blocked until the
coroutine finishes, and the coroutine runs on a different loop — it must not await anything bound to
the caller's loop (a future, a lock, a queue created there), which would deadlock. Prefer awaiting
directly wherever the caller can be async.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result (or raise its exception), blocking the caller."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)

    outcome: list[T] = []
    failure: list[BaseException] = []
    context = contextvars.copy_context()

    def worker() -> None:
        try:
            outcome.append(context.run(asyncio.run, coro))
        except BaseException as exc:  # handed to the caller's thread and re-raised there
            failure.append(exc)

    thread = threading.Thread(target=worker, name="keel-run-sync", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]
