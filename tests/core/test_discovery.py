"""Discovery on a temporary root: which plugin files there are, and a file that fails to import."""

from __future__ import annotations

from pathlib import Path

from core import Container, Registry
from core.discovery import Discovery
from tests.kit import write


def test_plugin_files_are_sorted_and_skip_private_ones_and_a_broken_file_is_a_load_error(
    tmp_path: Path,
) -> None:
    for name in ("b/plugins/two.py", "a/plugins/one.py", "a/plugins/_helper.py", "a/plugins/notes.txt"):
        write(tmp_path, f"domains/{name}", "")
    write(tmp_path, "domains/a/plugins/zz_broken.py", "def (:\n")
    registry = Registry()
    discovery = Discovery(tmp_path, registry, Container(registry))
    files = discovery.plugin_files()
    assert [discovery.relative(p) for p in files] == [
        "domains/a/plugins/one.py",
        "domains/a/plugins/zz_broken.py",
        "domains/b/plugins/two.py",
    ]
    module, error = discovery.import_module(files[1])
    assert module is None and error is not None and error.startswith("SyntaxError")
    assert registry.has_load_error("domains/a/plugins/zz_broken.py")
    assert discovery.discover_tools() == []  # no tools folder: nothing, and no error
