"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os

import pytest


def require_services() -> bool:
    """CI sets REQUIRE_SERVICES=1: a missing PostgreSQL or Redis then fails instead of skipping."""
    return os.environ.get("REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


def service_unavailable(reason: str) -> None:
    """Skip with a reason, or fail when services are required."""
    if require_services():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)
