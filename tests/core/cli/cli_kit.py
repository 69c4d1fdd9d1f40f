"""Running ``keel`` as a subprocess on a project root, as a person runs it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from tests.kit import PROJECT, until

# Settings of the machine running the tests that would change what a command sees.
CLEARED = (
    "DATABASE_URL", "EVENT_BUS_URL", "STORE_URL", "CLUSTER_URL", "SCHEDULER_URL", "CHECKPOINT_URL",
    "LLM_PROVIDER", "LLM_BASE_URL", "LOG_FORMAT", "LOG_LEVEL", "NO_COLOR", "FORCE_COLOR", "KEEL_TOKEN",
    "HOST", "PORT", "AUTH_SECRET_KEY", "OTEL_ENABLED", "PLUGINS_WATCH", "KEEL_ROOT",
)  # fmt: skip


def environment(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    return {**env, **settings}


def keel(
    root: Path, *arguments: str, timeout: float = 60, **settings: str
) -> subprocess.CompletedProcess[str]:
    """``keel --root ROOT ARGUMENTS`` with this checkout's ``core``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "core.cli", "--root", str(root), *arguments],
        cwd=PROJECT,
        env=environment(**settings),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Running:
    def __init__(self, process: asyncio.subprocess.Process, log: Path, url: str) -> None:
        self.process = process
        self.log = log
        self.url = url

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.asynccontextmanager
async def keel_run(
    root: Path, log: Path, *, ready: str = r"serving on (http://[^\s\"]+)", **settings: str
) -> AsyncIterator[Running]:
    """``keel run`` on ``root`` (a free port), stdout and stderr into ``log`` (a pipe, not a
    terminal), until its output matches ``ready`` (by default: where it serves, the URL);
    stopped with SIGTERM on exit."""
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "core.cli",
            "--root",
            str(root),
            "run",
            cwd=PROJECT,
            env=environment(**{"PORT": "0", "HOST": "127.0.0.1", **settings}),
            stdout=out,
            stderr=out,
        )
    found: list[str] = []

    def serving() -> bool:
        text = log.read_text(errors="replace")
        match = re.search(ready, text)
        if match:
            found.append(match.group(1) if match.groups() else "")
        assert process.returncode is None, text
        return bool(match)

    try:
        await until(serving, f"{root.name} serving", limit=60)
        yield Running(process, log, found[0])
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
