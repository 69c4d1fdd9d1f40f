"""Helpers for tests that boot a real Kernel on a temporary project root."""

from __future__ import annotations

import asyncio
import os
import textwrap
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from core import Kernel

PROJECT = Path(__file__).resolve().parent.parent


def make_root(
    tmp_path: Path, *, tools: Iterable[str] = (), domains: Iterable[str] = (), name: str = "root"
) -> Path:
    """A project root under ``tmp_path`` linking the named project tools and domains."""
    root = tmp_path / name
    (root / "tools").mkdir(parents=True)
    (root / "domains").mkdir()
    for tool in tools:
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
async def serving(root: Path, *, boot_timeout: float = 30.0) -> AsyncIterator[tuple[Kernel, str]]:
    """A kernel booted and serving HTTP on a free loopback port: ``(kernel, base_url)``.

    Sets ``PORT=0`` and ``HOST=127.0.0.1`` for the kernel's own environment only.
    """
    saved = {key: os.environ.get(key) for key in ("PORT", "HOST")}
    os.environ.update({"PORT": "0", "HOST": "127.0.0.1"})
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
