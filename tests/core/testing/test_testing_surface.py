"""Test doubles are reachable only from core.testing; production modules never expose them."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import core
import core.testing

DOUBLE_PREFIXES = ("Fake", "Recording")


def every_core_module() -> list[ModuleType]:
    modules = [core]
    for info in pkgutil.walk_packages(core.__path__, prefix="core."):
        modules.append(importlib.import_module(info.name))
    return modules


def public_names(module: ModuleType) -> list[str]:
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return list(exported)
    return [name for name in vars(module) if not name.startswith("_")]


def test_doubles_are_public_only_in_core_testing() -> None:
    offenders = []
    for module in every_core_module():
        if module.__name__ == "core.testing" or module.__name__.startswith("core.testing."):
            continue
        for name in public_names(module):
            value = getattr(module, name, None)
            origin = getattr(value, "__module__", "") or ""
            if name.startswith(DOUBLE_PREFIXES) or origin.startswith("core.testing"):
                offenders.append(f"{module.__name__}.{name}")
    assert offenders == []


def test_core_testing_exports_every_double_the_document_lists() -> None:
    documented = {
        "FakeLLM",
        "FakeTool",
        "FakeClock",
        "FakeSearch",
        "FakeFetch",
        "FakeMemory",
        "FakeGrounder",
        "FakeCompactor",
        "RecordingTracer",
        "RecordingSpan",
        "FakeCtx",
        "Turn",
        "ScriptExhausted",
        "make_test_ctx",
        "FakeClaudeCli",
        "FakeCodexCli",
        "codex_turn",
    }
    assert documented <= set(core.testing.__all__)
    assert all(hasattr(core.testing, name) for name in core.testing.__all__)
    defined_here = [
        value for value in map(core.testing.__dict__.get, core.testing.__all__) if isinstance(value, type)
    ]
    assert all(value.__module__.startswith("core.testing") for value in defined_here)


def test_the_walk_sees_the_production_packages() -> None:
    names = {module.__name__ for module in every_core_module()}
    assert {"core.runtime", "core.policies", "core.agents", "core.state.stores", "core.testing.llm"} <= names
