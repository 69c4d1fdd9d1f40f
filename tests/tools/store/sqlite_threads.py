"""Watching the connection threads of the SQLite backends (store and checkpoint): which ones a test
started, and which of them are still alive once they have been given time to end."""

from __future__ import annotations

import asyncio
import threading


def threads_named(name: str) -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == name}


async def still_alive(threads: set[threading.Thread], limit: float = 5.0) -> list[threading.Thread]:
    """The threads among ``threads`` still alive after waiting up to ``limit`` seconds for each."""
    for thread in threads:
        await asyncio.to_thread(thread.join, limit)
    return [thread for thread in threads if thread.is_alive()]
