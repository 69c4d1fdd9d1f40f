"""Booting a clean checkout leaves it clean: nothing the service writes at boot is tracked and stale.

The checkout is a ``git clone`` of this repository's HEAD (the committed tree, nothing else),
booted as ``make run`` boots it (``python main.py`` with ``PLUGINS_WATCH=1``) in a process of its
own with an environment that configures nothing, stopped with SIGTERM once it serves.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from tests.kit import until
from tests.tools.context.checkout_kit import clean_checkout, git


async def test_booting_a_clean_checkout_leaves_git_status_clean(tmp_path: Path) -> None:
    checkout = clean_checkout(tmp_path)
    log = tmp_path / "boot.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PORT": "0",
        "HOST": "127.0.0.1",
        "PLUGINS_WATCH": "1",
    }
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "main.py", cwd=checkout, env=env, stdout=out, stderr=out
        )
    try:

        def serving() -> bool:
            text = log.read_text(errors="replace")
            assert process.returncode is None, text
            return re.search(r"serving on http://\S+", text) is not None

        await until(serving, "the checkout serving", limit=90)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
    output = log.read_text(errors="replace")
    assert process.returncode == 0, output
    assert (checkout / "AI_CONTEXT.md").is_file()
    assert git("status", "--porcelain", cwd=checkout) == "", output
