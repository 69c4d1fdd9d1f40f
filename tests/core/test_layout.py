"""Architecture guard: the parts of the code base and the arrows between them.

Every production module belongs to a part of :data:`LAYOUT`, and a part imports only the parts its
entry allows (besides itself and, in ``core``, the standard library only: see test_core_purity).
A new package under ``core`` is not in any part until it is placed here, which is the point: where
it sits, and what may import it, is decided once, in this file. The arrows form no cycle, so each
part can be read, tested and changed knowing only the parts below it.

Walked on the source with ``ast`` (``imports_of``), so nested and ``TYPE_CHECKING`` imports count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.test_core_purity import imports_of, python_files
from tests.kit import PROJECT

_BOTTOM = frozenset({"core.serialization", "core.contracts", "core.execution", "core.runtime"})
_CORE = frozenset({*_BOTTOM, "core.state", "core.agents", "core.policies", "core", "core.cli", "core.runs"})

LAYOUT: dict[str, frozenset[str]] = {
    # The bottom: plain data, the contracts between parts, cancellation, a run's context and meters.
    "core.serialization": frozenset(),
    "core.contracts": frozenset({"core.serialization"}),
    "core.execution": frozenset({"core.contracts", "core.serialization"}),
    "core.runtime": frozenset({"core.contracts", "core.execution", "core.serialization"}),
    # Built on the bottom: stores, agents (and how they think), the policies (middlewares).
    "core.state": _BOTTOM,
    "core.agents": _BOTTOM,
    "core.policies": _BOTTOM | {"core.agents"},
    # The kernel (``core``'s own modules: booting, the registry, errors) and its command line.
    "core": _BOTTOM | {"core.state", "core.agents", "core.policies"},
    "core.cli": _BOTTOM | {"core.state", "core.agents", "core.policies", "core"},
    # The durable-run runtime: core and the standard library only, never tools or domains.
    "core.runs": _BOTTOM | {"core.state", "core.agents", "core.policies", "core"},
    # Test doubles: anything in core; no production part may import them.
    "core.testing": _CORE,
    # Tools and domains (each folder one part: they never import each other, see test_core_purity).
    "tools": _CORE,
    "domains": _CORE,
    "main": frozenset({"core.cli"}),
}


def part_of(module: str) -> str | None:
    """The part ``module`` belongs to; None for a module outside the code base (stdlib, a library)."""
    names = module.split(".")
    if names[0] in ("tools", "domains", "main"):
        return names[0]
    if names[0] != "core":
        return None
    if len(names) > 1 and (PROJECT / "core" / names[1]).is_dir():
        return f"core.{names[1]}"
    return "core"


def module_name(path: Path, root: Path = PROJECT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def production_modules() -> list[Path]:
    return [
        PROJECT / "main.py",
        *(p for d in ("core", "tools", "domains") for p in python_files(PROJECT / d)),
    ]


def forbidden_arrows(paths: list[Path], root: Path = PROJECT) -> list[str]:
    found = []
    for path in paths:
        source = part_of(module_name(path, root))
        for line, module in imports_of(path, root):
            target = part_of(module)
            if source is None or target is None or target == source:
                continue
            if target not in LAYOUT.get(source, frozenset()):
                found.append(f"{path.relative_to(root)}:{line}: {source} -> {target} ({module})")
    return found


def test_every_module_belongs_to_a_known_part() -> None:
    unplaced = [
        str(path.relative_to(PROJECT))
        for path in production_modules()
        if part_of(module_name(path)) not in LAYOUT
    ]
    assert unplaced == []


def test_every_import_follows_an_allowed_arrow() -> None:
    assert forbidden_arrows(production_modules()) == []


def test_the_arrows_form_no_cycle() -> None:
    done: set[str] = set()

    def visit(part: str, path: tuple[str, ...]) -> None:
        assert part not in path, f"cycle: {' -> '.join((*path, part))}"
        if part in done:
            return
        for below in LAYOUT[part]:
            visit(below, (*path, part))
        done.add(part)

    for part in LAYOUT:
        visit(part, ())


def test_the_runs_runtime_sits_above_agents_and_below_domains() -> None:
    assert "core.runs" in LAYOUT["domains"]
    assert {"tools", "domains"}.isdisjoint(LAYOUT["core.runs"])
    assert all(
        "core.runs" not in LAYOUT[part]
        for part in LAYOUT
        if part.startswith("core") and part != "core.testing"
    )


@pytest.mark.parametrize(
    ("relative", "source", "offence"),
    [
        ("core/runs/probe.py", "def f():\n    from tools.db import db_tool\n", "core.runs -> tools"),
        ("core/runs/probe.py", "from domains.agents import plugins\n", "core.runs -> domains"),
        (
            "core/agents/probe.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..runs import x\n",
            "core.agents -> core.runs",
        ),
        ("core/probe.py", "from core.runs import RunManager\n", "core -> core.runs"),
        ("core/runs/probe.py", "from core.testing import FakeLLM\n", "core.runs -> core.testing"),
    ],
)
def test_the_guard_catches_a_forbidden_arrow(
    tmp_path: Path, relative: str, source: str, offence: str
) -> None:
    probe = tmp_path / relative
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(source)
    (found,) = forbidden_arrows([probe], tmp_path)
    assert offence in found


def test_the_guard_allows_the_arrows_the_layout_names(tmp_path: Path) -> None:
    probe = tmp_path / "domains" / "agents" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from core.runs import RunManager\nfrom core.agents import Agent\nimport httpx\n")
    assert forbidden_arrows([probe], tmp_path) == []


def module_cycles(package: Path, root: Path = PROJECT) -> list[str]:
    """Import cycles between the modules of ``package`` (a package's ``__init__`` left out: it
    gathers its modules, it is not one of them)."""
    modules = {module_name(p, root): p for p in python_files(package) if p.name != "__init__.py"}
    arrows = {
        name: {m for _, m in imports_of(path, root) if m in modules and m != name}
        for name, path in modules.items()
    }
    cycles: list[str] = []
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycles.append(" -> ".join((*path[path.index(name) :], name)))
            return
        if name in done:
            return
        for imported in sorted(arrows[name]):
            visit(imported, (*path, name))
        done.add(name)

    for name in sorted(modules):
        visit(name, ())
    return cycles


def test_the_modules_of_the_runs_runtime_import_each_other_one_way() -> None:
    assert module_cycles(PROJECT / "core" / "runs") == []


def test_the_cycle_check_sees_a_type_checking_import(tmp_path: Path) -> None:
    package = tmp_path / "core" / "runs"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from .b import f\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import g\n"
    )
    assert module_cycles(package, tmp_path) == ["core.runs.a -> core.runs.b -> core.runs.a"]
