"""``keel doctor`` as a subprocess: a good configuration passes, a bad value or an unreachable
backend fails with the fix, exit status 1."""

from __future__ import annotations

from pathlib import Path

from tests.core.cli.cli_kit import keel
from tests.kit import make_root

TOOLS = ("auth", "checkpoint", "db", "event_bus", "http", "llm", "logger", "scheduler", "store", "telemetry")


def project(tmp_path: Path) -> Path:
    return make_root(tmp_path, tools=TOOLS)


def lines(output: str) -> dict[str, str]:
    """``{check name: "ok detail" | "FAIL detail"}`` from the report."""
    report: dict[str, str] = {}
    for line in output.splitlines():
        verdict, _, rest = line.partition(" ")
        name, _, detail = rest.partition(": ")
        if verdict in ("ok", "FAIL"):
            report[name] = f"{verdict} {detail}"
    return report


def test_a_good_configuration_passes_every_check(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = keel(root, "doctor", LLM_PROVIDER="echo")
    assert done.returncode == 0, done.stdout + done.stderr
    report = lines(done.stdout)
    assert all(line.startswith("ok ") for line in report.values()), done.stdout
    assert report["config.llm"].startswith("ok echo provider")
    assert (
        report["backend.database"]
        == f"ok SQLite file {root / 'data' / 'keel.db'} is writable (created at boot)"
    )
    assert not (root / "data").exists()  # doctor looks, it does not create


def test_a_bad_setting_fails_naming_the_value_and_the_fix(tmp_path: Path) -> None:
    done = keel(project(tmp_path), "doctor", PORT="eighty", DB_BUSY_TIMEOUT="soon")
    assert done.returncode == 1, done.stdout + done.stderr
    report = lines(done.stdout)
    assert report["config.http"] == (
        "FAIL PORT must be a whole number between 0 and 65535, got 'eighty' "
        "— fix: correct the setting in the environment or in .env"
    )
    assert report["config.core"].startswith("ok ")
    assert report["config.db"].startswith("FAIL DB_BUSY_TIMEOUT must be a number, at least 0, got 'soon'")
    assert done.stdout.endswith("2 check(s) failed\n")


def test_a_bad_setting_in_the_dotenv_file_is_found_too(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / ".env").write_text("LOG_FORMAT=yaml\n")
    done = keel(root, "doctor")
    assert done.returncode == 1
    expected = "FAIL LOG_FORMAT must be one of json, text, got 'yaml'"
    assert lines(done.stdout)["config.core"].startswith(expected)


def test_an_unreachable_postgresql_fails_with_the_fix(tmp_path: Path) -> None:
    done = keel(
        project(tmp_path), "doctor", "--timeout", "2", DATABASE_URL="postgresql://postgres@127.0.0.1:1/x"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    failure = lines(done.stdout)["backend.database"]
    assert failure.startswith("FAIL cannot connect to PostgreSQL at 127.0.0.1:1"), failure
    assert "fix: start PostgreSQL there" in failure and "correct DATABASE_URL" in failure


def test_a_reachable_postgresql_and_redis_pass(tmp_path: Path) -> None:
    done = keel(
        project(tmp_path),
        "doctor",
        DATABASE_URL="postgresql://postgres@127.0.0.1:5432/test",
        EVENT_BUS_URL="redis://127.0.0.1:6379/0",
    )
    report = lines(done.stdout)
    assert report["backend.database"] == "ok PostgreSQL at 127.0.0.1:5432 answers", done.stdout
    assert report["backend.redis"] == "ok PONG from 127.0.0.1:6379 (EVENT_BUS_URL)"
    assert done.returncode == 0, done.stdout


def test_an_unreachable_redis_fails_with_the_fix(tmp_path: Path) -> None:
    done = keel(project(tmp_path), "doctor", "--timeout", "2", STORE_URL="redis://:hunter2@127.0.0.1:1/0")
    assert done.returncode == 1
    failure = lines(done.stdout)["backend.redis"]
    assert failure.startswith("FAIL Redis at 127.0.0.1:1 (STORE_URL) does not answer PING")
    assert "fix: start Redis there, or correct STORE_URL" in failure
    assert "hunter2" not in done.stdout  # a password never reaches the report


def test_a_separate_scheduler_database_is_tried_too(tmp_path: Path) -> None:
    done = keel(
        project(tmp_path), "doctor", "--timeout", "2", SCHEDULER_URL="postgresql://postgres@127.0.0.1:1/x"
    )
    assert done.returncode == 1
    failure = lines(done.stdout)["backend.other_databases"]
    assert failure.startswith("FAIL cannot connect to PostgreSQL at 127.0.0.1:1"), failure
    assert "correct SCHEDULER_URL (or leave it empty to use DATABASE_URL)" in failure
    assert lines(done.stdout)["backend.database"].startswith("ok SQLite file ")
