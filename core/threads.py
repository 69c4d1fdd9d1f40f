"""Run a blocking hook off the event loop without letting a hung one hold the process hostage.

``asyncio.to_thread`` uses the default executor, whose threads are joined when the loop closes: a
plugin whose sync ``on_boot`` never returns would then block shutdown forever. Each call here gets
its own daemon thread, so a hook that outlives its timeout is abandoned, not waited for.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any


async def run_in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # delivered to the awaiting task, never lost in the thread
            settle_from_thread(loop, future, None, exc)
        else:
            settle_from_thread(loop, future, result, None)

    threading.Thread(target=target, name=f"keel-hook-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    return await future


def settle_from_thread(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    """From a worker thread, give ``future`` (owned by ``loop``) its result or error, once."""

    def settle() -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:
        pass  # the loop has closed: the awaiting task is gone, there is nobody to tell
