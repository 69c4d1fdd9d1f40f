"""Architecture guard: only ``core/settings.py`` reads the environment.

A variable parsed in one place is reported the same way everywhere (the variable, the value, what
was expected) and can be found with one grep. The guard walks the source with ``ast``, so an
aliased ``import os as o``, a ``from os import getenv`` or a read nested in a function is caught.
"""

from __future__ import annotations

import ast

from tests.core.test_core_purity import python_files
from tests.kit import PROJECT

ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})

# Modules that may touch ``os.environ`` themselves, each with the reason.
SANCTIONED = {
    "core/settings.py": "the home of every environment read",
    "tools/coding_cli/spawn.py": "copies the environment into the subprocess it starts; reads no setting",
}


def environment_uses(source: str) -> list[int]:
    """The lines of ``source`` that reach ``os.environ``/``os.getenv`` (and friends)."""
    tree = ast.parse(source)
    os_names = {"os"}
    direct: set[str] = set()
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "os":
                    os_names.add(alias.asname or "os")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and not node.level:
            for alias in node.names:
                if alias.name in ENV_NAMES:
                    direct.add(alias.asname or alias.name)
                    lines.append(node.lineno)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENV_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ) or (isinstance(node, ast.Name) and node.id in direct):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_only_the_settings_module_reads_the_environment() -> None:
    offenders = [
        f"{path.relative_to(PROJECT)}:{line}"
        for directory in ("core", "tools", "domains")
        for path in python_files(PROJECT / directory)
        if str(path.relative_to(PROJECT)) not in SANCTIONED
        for line in environment_uses(path.read_text(encoding="utf-8"))
    ] + [f"main.py:{line}" for line in environment_uses((PROJECT / "main.py").read_text(encoding="utf-8"))]
    assert offenders == [], "read the environment through core.settings (env_str, env_int, ...)"


def test_every_sanctioned_module_exists_and_still_needs_it() -> None:
    for relative in SANCTIONED:
        assert environment_uses((PROJECT / relative).read_text(encoding="utf-8")), relative


def test_the_guard_catches_every_spelling() -> None:
    assert environment_uses("import os\nx = os.environ.get('A')\n") == [2]
    assert environment_uses("import os\ndef f():\n    return os.getenv('A')\n") == [3]
    assert environment_uses("import os as o\no.environ['A'] = '1'\n") == [2]
    assert environment_uses("from os import environ\ny = environ['A']\n") == [1, 2]
    assert environment_uses("from os import getenv as g\ng('A')\n") == [1, 2]
    assert environment_uses("import os\nos.path.join('a')\nenviron = {}\nenviron['x']\n") == []
    assert environment_uses("text = 'os.environ'\n") == []
