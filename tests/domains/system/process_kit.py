"""A real Keel process on a project root, for tests that need signals, exits and several processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

from tests.kit import PROJECT, until


class KeelProcess:
    def __init__(self, process: asyncio.subprocess.Process, log: Path, url: str) -> None:
        self.process = process
        self.log = log
        self.url = url

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.asynccontextmanager
async def keel_process(root: Path, log: Path, env: dict[str, str]) -> AsyncIterator[KeelProcess]:
    script = root / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(PROJECT)!r})
        from core import Kernel
        sys.exit(Kernel({str(root)!r}).run())
    """)
    )
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env={**os.environ, **env}, cwd=root, stdout=out, stderr=out
        )
    try:
        found: list[str] = []

        def serving() -> bool:
            match = re.search(r"serving on (http://\S+)", log.read_text(errors="replace"))
            if match:
                found.append(match.group(1))
            assert process.returncode is None, log.read_text(errors="replace")
            return bool(match)

        await until(serving, f"{root.name} serving", limit=60)
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
