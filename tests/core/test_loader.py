"""``core.loader``: a file imported by path gets the module attributes the standard import helper
would give it (the loader builds the spec itself, for speed), and its packages are this root's.
(The autouse fixture in tests/conftest.py puts the project's own ``tools.*`` modules back.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from core.loader import import_file
from tests.kit import write

ATTRIBUTES = ("__name__", "__file__", "__cached__", "__package__", "__path__")


def test_a_module_and_a_package_look_as_spec_from_file_location_makes_them(tmp_path: Path) -> None:
    write(tmp_path, "tools/thing/__init__.py", "VALUE = 'package'\n")
    write(tmp_path, "tools/thing/thing_tool.py", "from . import VALUE\n")
    for relative, name in (
        ("tools/thing/__init__.py", "tools.thing"),
        ("tools/thing/thing_tool.py", "tools.thing.thing_tool"),
    ):
        path = tmp_path / relative
        module = import_file(tmp_path, path)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        expected = importlib.util.module_from_spec(spec)
        for attribute in ATTRIBUTES:
            assert getattr(module, attribute, None) == getattr(expected, attribute, None), attribute
        assert module.__spec__ is not None and module.__spec__.has_location
        assert module.__spec__.submodule_search_locations == spec.submodule_search_locations
        assert type(module.__loader__) is type(spec.loader)
    assert sys.modules["tools.thing.thing_tool"].VALUE == "package"
    assert sys.modules["tools.thing"].__path__ == [str(tmp_path / "tools" / "thing")]
