"""A missing browser: the browser tests skip and say what to run, or fail when services are required."""

from __future__ import annotations

import pytest

from tests.domains.dashboard.dashboard_kit import require_browser
from tests.kit import PROJECT


def test_a_missing_browser_skips_saying_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="run: make browser"):
        require_browser(None)


def test_a_missing_browser_fails_when_services_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="run: make browser"):
        require_browser(None)


def test_an_installed_browser_is_used() -> None:
    assert require_browser("/usr/bin/chromium") == "/usr/bin/chromium"


def test_make_test_installs_nothing_and_make_browser_does() -> None:
    makefile = (PROJECT / "Makefile").read_text(encoding="utf-8")
    targets: dict[str, list[str]] = {}
    current: str | None = None
    for line in makefile.splitlines():
        if line and not line[0].isspace() and ":" in line and not line.startswith(("#", ".")):
            current = line.split(":", 1)[0].strip()
            targets[current] = []
        elif line.startswith("\t") and current is not None:
            targets[current].append(line)
    assert not any("install_browser" in line for line in targets["test"])
    assert any("install_browser" in line for line in targets["browser"])
    ci = (PROJECT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.index("make browser") < ci.index("REQUIRE_SERVICES=1 make test")
