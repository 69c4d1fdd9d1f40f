"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


def require_services() -> bool:
    """CI sets REQUIRE_SERVICES=1: a missing PostgreSQL or Redis then fails instead of skipping."""
    return os.environ.get("REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


def service_unavailable(reason: str) -> None:
    """Skip with a reason, or fail when services are required."""
    if require_services():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


_PROJECT_PACKAGES = ("tools", "domains")


@pytest.fixture(autouse=True)
def _project_modules_restored() -> Iterator[None]:
    """Booting a temporary root rebinds ``tools.*`` / ``domains.*`` in ``sys.modules`` to that root's
    files (see core.loader); put the project's own modules back so later imports find them."""
    saved = {name: module for name, module in sys.modules.items() if _is_project_module(name)}
    yield
    for name in [name for name in sys.modules if _is_project_module(name)]:
        if sys.modules[name] is not saved.get(name):
            del sys.modules[name]
    sys.modules.update(saved)


def _is_project_module(name: str) -> bool:
    return name.split(".", 1)[0] in _PROJECT_PACKAGES
