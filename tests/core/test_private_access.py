"""Architecture guard: no module reaches into another object's private members.

A leading underscore is the only privacy Python has; once a second class reads ``other._name``,
that name is an interface nobody declared, and renaming it breaks code far away (the reloader
used to drive the kernel through a dozen of them). Walks the source with ``ast``: ``x._name`` is
an offence unless ``x`` is ``self``, ``cls`` or ``super()``; dunders are not private. A module's
own private functions and constants are plain names, never attributes, so they pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.kit import PROJECT

SCANNED = ("core", "tools", "domains")
OWN = frozenset({"self", "cls"})

SANCTIONED: dict[tuple[str, str], str] = {
    ("core/container.py", "sys._getframe"): "the standard library's frame access: names the caller's line",
    ("core/watchdog.py", "sys._current_frames"): "the standard library's only way to see a stalled loop",
    ("core/serving.py", "os._exit"): "exiting without joining threads that ignored cancellation",
}
"""``(file, access)`` pairs allowed anyway, each with why: only private names of the standard library."""


NAMED_TUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make"})
"""Public despite the underscore: a named tuple's methods (``urlsplit(url)._replace(...)``)."""


def is_private(name: str) -> bool:
    if name in NAMED_TUPLE_API:
        return False
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_own(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in OWN
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_accesses(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """``(line, "receiver._name")`` for every private attribute read or written on another object."""
    found = [
        (node.lineno, f"{ast.unparse(node.value)}.{node.attr}")
        for node in ast.walk(ast.parse(source, filename=filename))
        if isinstance(node, ast.Attribute) and is_private(node.attr) and not _is_own(node.value)
    ]
    return sorted(found)


def offences(root: Path = PROJECT) -> list[str]:
    found = []
    for directory in SCANNED:
        for path in sorted((root / directory).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            relative = path.relative_to(root).as_posix()
            for line, access in private_accesses(path.read_text(encoding="utf-8"), str(path)):
                if (relative, access) not in SANCTIONED:
                    found.append(f"{relative}:{line}: {access}")
    return found


def test_no_module_touches_another_objects_private_members() -> None:
    assert offences() == []


def test_every_sanctioned_exception_is_still_needed() -> None:
    used = {
        (path.relative_to(PROJECT).as_posix(), access)
        for directory in SCANNED
        for path in (PROJECT / directory).rglob("*.py")
        if "__pycache__" not in path.parts
        for _, access in private_accesses(path.read_text(encoding="utf-8"))
    }
    assert sorted(set(SANCTIONED) - used) == []
    assert all(reason.strip() for reason in SANCTIONED.values())


def test_the_guard_catches_a_private_member_of_another_object() -> None:
    sample = (
        "class Host:\n"
        "    def load(self, kernel):\n"
        "        kernel._construct()\n"
        "        self._kernel._release('x')\n"
        "        kernel.plugins[0]._owner = 1\n"
    )
    assert private_accesses(sample) == [
        (3, "kernel._construct"),
        (4, "self._kernel._release"),
        (5, "kernel.plugins[0]._owner"),
    ]


def test_the_guard_passes_own_members_dunders_and_module_private_names() -> None:
    sample = (
        "_CACHE = {}\n"
        "def _helper():\n"
        "    return _CACHE\n"
        "class Tool(Base):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        super()._setup()\n"
        "        self._state = _helper()\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        return cls._default, type(cls).__name__, Tool.__doc__\n"
        "def redacted(parts):\n"
        "    return parts._replace(netloc='x')\n"
    )
    assert private_accesses(sample) == []


def test_the_whole_scan_reports_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "probe.py").write_text("def f(registry):\n    return registry._tools\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "ok.py").write_text("def g(self):\n    return self._tools\n")
    assert offences(tmp_path) == ["core/probe.py:2: registry._tools"]
