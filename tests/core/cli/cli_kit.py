"""Running ``keel`` as a subprocess on a project root, as a person runs it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from tests.kit import PROJECT, SERVING_ON, KeelProcess, keel_process_serving

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


@contextlib.asynccontextmanager
async def keel_run(
    root: Path, log: Path, *, ready: str = SERVING_ON, **settings: str
) -> AsyncIterator[KeelProcess]:
    """``keel run`` on ``root`` (a free port), stdout and stderr into ``log`` (a pipe, not a
    terminal), until its output matches ``ready`` (by default: where it serves, the URL);
    stopped with SIGTERM on exit."""
    async with keel_process_serving(
        [sys.executable, "-m", "core.cli", "--root", str(root), "run"],
        log,
        cwd=PROJECT,
        env=environment(**{"PORT": "0", "HOST": "127.0.0.1", **settings}),
        what=f"{root.name} serving",
        ready=ready,
    ) as running:
        yield running
