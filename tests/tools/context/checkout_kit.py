"""A clean checkout of this repository's HEAD, for tests of what a fresh clone does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import PROJECT


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=120
    ).stdout


def clean_checkout(tmp_path: Path) -> Path:
    """A ``git clone`` of HEAD under ``tmp_path``: the committed tree, nothing else (skips without git)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        head = git("rev-parse", "HEAD", cwd=PROJECT).strip()
    except subprocess.CalledProcessError:
        pytest.skip("the project is not a git checkout")
    clone = tmp_path / "checkout"
    git("clone", "--quiet", "--no-checkout", str(PROJECT), str(clone), cwd=tmp_path)
    git("checkout", "--quiet", head, cwd=clone)
    assert git("status", "--porcelain", cwd=clone) == ""
    return clone
