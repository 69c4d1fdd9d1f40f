"""A scheduler "process" for the cluster tests: ``python worker.py ROOT MODE FILE [ARGS]``.

It sets up a ``scheduler`` tool from the environment (``SCHEDULER_URL`` and friends), registers what
MODE says, serves until it is killed, and writes what its handlers do to FILE, one line each:

- ``ticks INTERVAL END``: a schedule ``shared`` every INTERVAL seconds; each tick due before END
  appends ``<pid> <due>``.
- ``hold``: a handler for jobs named ``held`` that appends ``started <pid> <job id>`` and never
  returns (the test kills the process while it holds the job).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from core.registry import Registry  # noqa: E402
from tools.scheduler.scheduler_tool import SchedulerTool  # noqa: E402


def append(file: str, line: str) -> None:
    with open(file, "a", encoding="utf-8") as out:
        out.write(line + "\n")


async def main(root: str, mode: str, file: str, *args: str) -> None:
    tool = SchedulerTool()
    tool.bind(project_root=Path(root), registry=Registry())
    await tool.setup()
    if mode == "ticks":
        interval, end = float(args[0]), float(args[1])

        async def tick(job: dict[str, Any]) -> None:
            if job["due_at"] < end:
                append(file, f"{os.getpid()} {job['due_at']!r}")

        tool.every(interval, tick, name="shared")
    elif mode == "hold":

        async def hold(job: dict[str, Any]) -> None:
            append(file, f"started {os.getpid()} {job['id']}")
            await asyncio.Event().wait()

        tool.on_job("held", hold)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    append(file, f"ready {os.getpid()}")
    await tool.serve(asyncio.Event())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
