"""Replace a file atomically, and only when its text changed (so its mtime means something)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_if_changed(path: Path, text: str) -> bool:
    """Replace ``path`` with ``text`` atomically unless it already holds exactly that; True if written."""
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True
