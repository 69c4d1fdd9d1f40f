"""Environment for the agents domain's tests: default databases under the temporary root, no
leftover settings, and the files the test plugins use as side effects and gates."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Files:
    sent_log: Path
    gate: Path
    gate_log: Path
    hold: Path

    def sent(self) -> list[str]:
        return self.sent_log.read_text().splitlines() if self.sent_log.exists() else []

    def gate_entries(self) -> int:
        return len(self.gate_log.read_text().splitlines()) if self.gate_log.exists() else 0


@pytest.fixture(autouse=True)
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Files:
    prefixes = ("AGENTS_", "LLM_", "STORE_", "CHECKPOINT_", "DATABASE_URL", "FAKE_LLM_", "OTEL_", "HOLD_")
    for name in [n for n in os.environ if n.startswith(prefixes) and n != "DATABASE_URL_TEST"]:
        monkeypatch.delenv(name)
    found = Files(
        tmp_path / "sent.log", tmp_path / "gate.open", tmp_path / "gate.log", tmp_path / "hold.open"
    )
    monkeypatch.setenv("SENT_LOG", str(found.sent_log))
    monkeypatch.setenv("GATE_FILE", str(found.gate))
    monkeypatch.setenv("GATE_LOG", str(found.gate_log))
    return found
