"""A real Keel process on a project root, for tests that need signals, exits and several processes."""

from __future__ import annotations

import contextlib
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

from tests.kit import PROJECT, KeelProcess, keel_process_serving


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
    async with keel_process_serving(
        [sys.executable, str(script)], log, cwd=root, env={**os.environ, **env}, what=f"{root.name} serving"
    ) as keel:
        yield keel
