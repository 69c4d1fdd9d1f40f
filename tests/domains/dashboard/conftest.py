"""Fixtures for the dashboard's tests: a clean service environment and a headless Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import service_unavailable
from tests.domains.dashboard.dashboard_kit import CHROMIUM_FLAGS, SERVICE_ENV, chromium_path, require_browser


@pytest.fixture(autouse=True)
def clean_service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in SERVICE_ENV:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Any]:
    """A Playwright browser context on Debian's Chromium, with a fresh profile directory."""
    executable = require_browser(chromium_path())
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        service_unavailable("the playwright package is not installed (pip install playwright)")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1440, "height": 1000},
            color_scheme="light",
        )
        try:
            yield context
        finally:
            await context.close()
