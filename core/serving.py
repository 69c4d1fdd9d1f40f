"""Serving the process: the tools' ``serve(stop)`` run together, SIGINT/SIGTERM ask them to stop,
and whatever outlives the kernel's shutdown is cancelled, or abandoned with an exit that says so."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from core.base_tool import BaseTool
from core.lifecycle import discard_result
from core.registry import Registry, ToolStatus
from core.settings import env_float

log = logging.getLogger("keel.kernel")


async def serve(
    tools: list[BaseTool], registry: Registry, stop: asyncio.Event, request_stop: Callable[[], None]
) -> bool:
    """Run every working tool's ``serve(stop)`` until ``stop`` is set and they have drained.

    Returns False when a tool's ``serve()`` failed (its port was taken, say): the process then
    exits non-zero instead of pretending it served. One server failing calls ``request_stop``:
    half a service (a watcher, no HTTP) is not served."""
    servers = [
        tool.serve(stop)  # type: ignore[attr-defined]
        for tool in tools
        if callable(getattr(tool, "serve", None))
        and registry.tool_status(tool.name) in (ToolStatus.OK, ToolStatus.FAIL)
    ]
    if not servers:
        await stop.wait()
        return True

    def stop_if_failed(task: asyncio.Future[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            request_stop()

    tasks = [asyncio.ensure_future(server) for server in servers]
    for task in tasks:
        task.add_done_callback(stop_if_failed)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [result for result in results if isinstance(result, BaseException)]
    for failure in failures:
        log.error("a tool's serve() failed", exc_info=failure)
    return not failures


def stop_on_signals(request_stop: Callable[[], None]) -> None:
    """SIGINT and SIGTERM call ``request_stop`` on the running loop."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, request_stop)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(request_stop))


def run_process(
    main: Callable[[], Coroutine[Any, Any, int]],
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None,
) -> int:
    """Run ``main()`` on a fresh loop, then stop what it left running; return its exit code.

    ``SHUTDOWN_TIMEOUT`` is read after ``main`` (its boot loads ``.env``)."""
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        code = runner.run(main())
        abandoned = runner.run(stop_leftovers(env_float("SHUTDOWN_TIMEOUT", 10.0)))
        if abandoned:
            # Closing the runner would wait for them forever: exit now, saying what is left.
            log.error("exiting with work that ignored cancellation abandoned: %s", ", ".join(abandoned))
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return code


async def stop_leftovers(limit: float) -> list[str]:
    """Cancel the tasks still running once the kernel has shut down and wait for them at most
    ``limit`` seconds; return what is still running then (tasks by name, non-daemon threads)."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    pending: set[asyncio.Task[Any]] = set()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=limit)
    for task in tasks:
        if task not in pending:
            discard_result(task)
    threads = [
        t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread() and t.is_alive()
    ]
    return [f"task {task.get_name()}" for task in pending] + [f"thread {t.name}" for t in threads]
