"""Helpers for live-reload service tests: a watched, served root; a request loop; bounded polling."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import Kernel
from tests.kit import make_root, serving, until

BOUND = 15.0
"""Seconds a change may take to show (the watcher's batching plus a reload); only a failure waits it out."""

TOOLS = ("http", "plugin_watcher", "event_bus", "logger", "system", "context")

ITEMS = """
    from core import BasePlugin


    class Items(BasePlugin):
        def __init__(self, http, event_bus):
            self.http = http
            self.event_bus = event_bus

        async def on_boot(self):
            self.http.add_endpoint("/items", "GET", self.list_items, tags=["shop"])
            await self.event_bus.subscribe("items.version", self.version)

        async def list_items(self, data, context):
            '''The items, and which version of the plugin answered.'''
            return {"version": VERSION}

        async def version(self, event):
            return VERSION


    VERSION = {version}
"""


def items(version: int) -> str:
    return ITEMS.replace("{version}", str(version))


def watched_root(tmp_path: Path, tools: Iterable[str] = TOOLS) -> Path:
    return make_root(tmp_path, tools=tools)


@asynccontextmanager
async def watching(root: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Kernel, str]]:
    """A served kernel whose plugin watcher is watching: ``(kernel, base_url)``."""
    monkeypatch.setenv("PLUGINS_WATCH", "1")
    monkeypatch.setenv("PLUGINS_WATCH_STEP_MS", "20")
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    async with serving(root) as (kernel, base_url):
        watcher = kernel.container.get_raw_tools()["plugin_watcher"]
        async with asyncio.timeout(BOUND):
            await watcher.wait_until_watching()  # type: ignore[attr-defined]
        assert watcher.watching  # type: ignore[attr-defined]
        yield kernel, base_url


async def answers(base_url: str, path: str, expected: Any) -> bool:
    """Whether ``GET path`` answers 200 with ``{"version": expected}`` (or 404 when ``expected`` is None)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:
        response = await client.get(path)
    if expected is None:
        return response.status_code == 404
    return response.status_code == 200 and response.json() == {"version": expected}


def dump(kernel: Kernel) -> dict[str, Any]:
    return kernel.registry.get_system_dump()


@dataclass
class Answer:
    status: int
    version: Any


@dataclass
class RequestLoop:
    """Workers GET each path in turn, over and over, until stopped (at most ``rounds`` times each).

    Every answer is kept in order per worker and path; a connection error or a 5xx is a failure.
    """

    base_url: str
    paths: tuple[str, ...]
    workers: int = 2
    rounds: int = 20_000
    failures: list[str] = field(default_factory=list)
    seen: list[dict[str, list[Answer]]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def __aenter__(self) -> RequestLoop:
        for _ in range(self.workers):
            answers: dict[str, list[Answer]] = {path: [] for path in self.paths}
            self.seen.append(answers)
            self._tasks.append(asyncio.create_task(self._work(answers)))
        await until(lambda: all(all(a) for a in self.seen), "every worker answered once")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _work(self, answers: dict[str, list[Answer]]) -> None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10) as client:
            for _ in range(self.rounds):
                if self._stop.is_set():
                    return
                for path in self.paths:
                    try:
                        response = await client.get(path)
                    except httpx.HTTPError as exc:
                        self.failures.append(f"GET {path}: {type(exc).__name__}: {exc}")
                        continue
                    if response.status_code >= 500:
                        self.failures.append(f"GET {path}: {response.status_code} {response.text}")
                    body = response.json() if response.status_code == 200 else None
                    version = body.get("version") if isinstance(body, dict) else None
                    answers[path].append(Answer(response.status_code, version))

    async def until_every_worker_sees(self, path: str, status: int, version: Any = None) -> None:
        """Wait until every worker's latest answer for ``path`` is ``(status, version)``."""

        def seen_by_all() -> bool:
            return all(
                a[path] and (a[path][-1].status, a[path][-1].version) == (status, version) for a in self.seen
            )

        await until(seen_by_all, f"every worker sees {status} {version} on {path}")

    def history(self, path: str) -> list[list[Answer]]:
        """Each worker's answers for ``path``, in order."""
        return [answers[path] for answers in self.seen]


def collapse(answers: list[Answer]) -> list[tuple[int, Any]]:
    """``answers`` with repeats folded: the distinct states a client went through, in order."""
    states: list[tuple[int, Any]] = []
    for answer in answers:
        state = (answer.status, answer.version)
        if not states or states[-1] != state:
            states.append(state)
    return states


def plugin_file(root: Path, name: str) -> Path:
    return root / "domains" / "shop" / "plugins" / name


def remove(path: Path) -> None:
    os.unlink(path)
