"""Helpers for tests that boot a real Kernel on a temporary project root, or drive one tool alone.

A root links the project's own tools and domains as folders (the kernel follows linked folders when
it discovers tools, and the loader keeps link paths, so modules are named after the temporary root).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import socket
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from core import BaseTool, Kernel
from core.registry import Registry

if TYPE_CHECKING:
    import httpx

PROJECT = Path(__file__).resolve().parent.parent

ToolT = TypeVar("ToolT", bound=BaseTool)

SHARED_TOOLS = "_shared"  # tools/_shared: code the tools share, linked whenever any tool is


PING_PLUGIN = """
    from core import BasePlugin


    class Ping(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/ping", "GET", self.ping)

        async def ping(self, data, context):
            return {"pong": True}
"""
"""A plugin (``<domain>.Ping``, for :func:`write`) answering ``GET /ping`` with ``{"pong": true}``:
a route that needs nothing but the http tool."""


def make_root(
    tmp_path: Path, *, tools: Iterable[str] = (), domains: Iterable[str] = (), name: str = "root"
) -> Path:
    """A project root under ``tmp_path`` linking the named project tools and domains."""
    root = tmp_path / name
    (root / "tools").mkdir(parents=True)
    (root / "domains").mkdir()
    tools = tuple(tools)
    for tool in (*tools, SHARED_TOOLS) if tools else ():
        (root / "tools" / tool).symlink_to(PROJECT / "tools" / tool, target_is_directory=True)
    for domain in domains:
        (root / "domains" / domain).symlink_to(PROJECT / "domains" / domain, target_is_directory=True)
    return root


def write(root: Path, relative: str, source: str) -> Path:
    """Write a (dedented) source file into the root, creating its folders."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def bound_tool(tool_class: type[ToolT], project_root: Path) -> ToolT:
    """A tool built as the kernel builds it (no arguments), bound to ``project_root`` and a fresh
    registry in which it is registered; not set up yet."""
    tool = tool_class()
    registry = Registry()
    registry.register_tool(tool_class.name)
    tool.bind(project_root=project_root, registry=registry)
    return tool


@asynccontextmanager
async def started_tool(tool_class: type[ToolT], project_root: Path) -> AsyncIterator[ToolT]:
    """A :func:`bound_tool` set up from the current environment, shut down on exit."""
    tool = bound_tool(tool_class, project_root)
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()


@asynccontextmanager
async def booted(root: Path) -> AsyncIterator[Kernel]:
    """A booted kernel (no serving); shut down on exit."""
    kernel = Kernel(root)
    await kernel.boot()
    try:
        yield kernel
    finally:
        await kernel.shutdown()


@asynccontextmanager
async def serving(
    root: Path, *, port: int = 0, boot_timeout: float = 30.0
) -> AsyncIterator[tuple[Kernel, str]]:
    """A kernel booted and serving HTTP on loopback: ``(kernel, base_url)``.

    ``port=0`` (the default) takes a free port; a fixed ``port`` (see :func:`free_port`) lets a
    second kernel come up where the first one was. Sets ``PORT`` and ``HOST=127.0.0.1`` for the
    kernel's own environment only.
    """
    saved = {key: os.environ.get(key) for key in ("PORT", "HOST")}
    os.environ.update({"PORT": str(port), "HOST": "127.0.0.1"})
    kernel = Kernel(root)
    try:
        await kernel.boot()
        serve_task = asyncio.create_task(kernel.serve())
        http = kernel.container.get("http")
        base_url = await asyncio.wait_for(http.wait_until_serving(), boot_timeout)
        try:
            yield kernel, base_url
        finally:
            kernel.request_stop()
            await asyncio.wait_for(serve_task, 30)
    finally:
        await kernel.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def free_port() -> int:
    """A loopback TCP port that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def until(condition: Callable[[], Awaitable[bool] | bool], what: str, limit: float = 15.0) -> None:
    """Poll ``condition`` (sync or async) every 10 ms until it holds; fail naming ``what`` after
    ``limit`` seconds. Only a failing test waits the limit out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"{what}: still not the case after {limit}s")
        await asyncio.sleep(0.01)


SERVING_ON = r"serving on (http://[^\s\"]+)"
"""What a Keel process logs once it serves (its URL the group), in text or JSON logs."""


class KeelProcess:
    """A Keel process of :func:`keel_process_serving`: the process, its log and where it serves."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path, url: str) -> None:
        self.process = process
        self.log = log
        self.url = url

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@asynccontextmanager
async def keel_process_serving(
    command: Sequence[str],
    log: Path,
    *,
    cwd: Path,
    env: Mapping[str, str],
    what: str,
    ready: str = SERVING_ON,
    limit: float = 60,
) -> AsyncIterator[KeelProcess]:
    """``command`` in a process of its own, stdout and stderr into ``log`` (a file, not a terminal),
    until its output matches ``ready`` (``url``: its first group, if any); fails naming ``what`` if
    the process exits first or ``limit`` seconds pass. Stopped with SIGTERM on exit (killed if it
    has not stopped 30 s later), so a test can then assert how it exited."""
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *command, cwd=cwd, env=dict(env), stdout=out, stderr=out
        )
    found: list[str] = []

    def started() -> bool:
        text = log.read_text(errors="replace")
        match = re.search(ready, text)
        if match:
            found.append(match.group(1) if match.groups() else "")
        assert process.returncode is None, text
        return bool(match)

    try:
        await until(started, what, limit=limit)
        yield KeelProcess(process, log, found[0])
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Parse a text/event-stream body into ``{"id", "event", "data"}`` dicts (``data`` decoded as
    JSON), skipping comment lines such as heartbeats."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(": ")
            event[field] = json.loads(value) if field == "data" else value
