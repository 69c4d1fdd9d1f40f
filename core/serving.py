"""Serving the process: what runs once the kernel has shut down."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from core.lifecycle import discard_result


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
