"""Booting a clean checkout leaves it clean: nothing the service writes at boot is tracked and stale.

The checkout is a ``git clone`` of this repository's HEAD (the committed tree, nothing else),
booted as ``make run`` boots it (``python main.py`` with ``PLUGINS_WATCH=1``) in a process of its
own with an environment that configures nothing, stopped with SIGTERM once it serves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.kit import keel_process_serving
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
    async with keel_process_serving(
        [sys.executable, "main.py"], log, cwd=checkout, env=env, what="the checkout serving", limit=90
    ) as keel:
        pass  # it serves: stop it
    output = keel.output()
    assert keel.process.returncode == 0, output
    assert (checkout / "AI_CONTEXT.md").is_file()
    assert git("status", "--porcelain", cwd=checkout) == "", output
