"""The public surface of ``core`` is deliberate: every exported name resolves."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["core", "core.runs"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_kernel_surface_for_tests() -> None:
    from core import BasePlugin, BaseTool, Kernel

    kernel = Kernel()
    assert kernel.container.registry is kernel.registry
    assert callable(kernel.boot) and callable(kernel.shutdown) and callable(kernel.run)
    assert issubclass(BaseTool, object) and issubclass(BasePlugin, object)
