"""The typed environment readers and the ``.env`` loader of ``core.settings``."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from core.cli import main
from core.cli.project import load_environment
from core.settings import (
    DotenvError,
    SettingError,
    env_choice,
    env_duration,
    env_flag,
    env_float,
    env_int,
    env_list,
    env_raw,
    env_secret,
    env_str,
    load_dotenv,
    parse_dotenv,
)


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A private copy of the environment, so whatever a test or the loader sets is undone."""
    copy = dict(os.environ)
    monkeypatch.setattr(os, "environ", copy)
    return copy


# -- readers -----------------------------------------------------------------------------------


def test_unset_or_blank_means_the_default() -> None:
    for env in ({}, {"X": ""}, {"X": "   "}):
        assert env_str("X", "d", environ=env) == "d"
        assert env_raw("X", environ=env) is None
        assert env_int("X", 7, environ=env) == 7
        assert env_float("X", 1.5, environ=env) == 1.5
        assert env_duration("X", 2.0, environ=env) == 2.0
        assert env_flag("X", True, environ=env) is True
        assert env_choice("X", "a", {"a", "b"}, environ=env) == "a"
        assert env_list("X", ("z",), environ=env) == ("z",)


def test_values_are_parsed_and_stripped() -> None:
    env = {"S": "  text ", "I": " 42 ", "F": "0.25", "L": " a, B ,, c ", "C": "Approve", "P": " sp "}
    assert env_str("S", environ=env) == "text"
    assert env_secret("P", environ=env) == " sp "
    assert env_int("I", 0, minimum=1, maximum=42, environ=env) == 42
    assert env_float("F", 0.0, maximum=1.0, environ=env) == 0.25
    assert env_list("L", environ=env) == ("a", "B", "c")
    assert env_list("L", lower=True, environ=env) == ("a", "b", "c")
    assert env_choice("C", "deny", ("deny", "approve"), environ=env) == "approve"
    assert env_duration("F", 1.0, positive=True, environ=env) == 0.25
    assert math.isinf(env_duration("X", 1.0, environ={"X": "inf"}))


@pytest.mark.parametrize("word", ["1", "true", "YES", "On"])
def test_true_words(word: str) -> None:
    assert env_flag("X", environ={"X": word}) is True


@pytest.mark.parametrize("word", ["0", "false", "No", "OFF"])
def test_false_words(word: str) -> None:
    assert env_flag("X", True, environ={"X": word}) is False


@pytest.mark.parametrize(
    ("read", "value", "message"),
    [
        (lambda e: env_int("N", 1, environ=e), "ten", "N must be a whole number, got 'ten'"),
        (
            lambda e: env_int("N", 1, minimum=1, environ=e),
            "0",
            "at least 1, got '0'",
        ),
        (lambda e: env_int("N", 1, minimum=0, maximum=9, environ=e), "10", "between 0 and 9, got '10'"),
        (lambda e: env_int("N", 1, minimum=1, unit="milliseconds", environ=e), "2.5", "of milliseconds"),
        (lambda e: env_float("N", 1, environ=e), "-1", "N must be a number, at least 0, got '-1'"),
        (lambda e: env_float("N", 1, environ=e), "nan", "N must be a number, at least 0, got 'nan'"),
        (lambda e: env_float("N", 1, maximum=1, environ=e), "1.5", "N must be a number between 0 and 1"),
        (
            lambda e: env_duration("N", 1, positive=True, environ=e),
            "0",
            "of seconds, above 0",
        ),
        (lambda e: env_duration("N", 1, finite=True, environ=e), "inf", "a finite number of seconds"),
        (lambda e: env_flag("N", environ=e), "maybe", "N must be true or false (1/0, yes/no, on/off), got"),
        (lambda e: env_choice("N", "a", ["a", "b"], environ=e), "c", "N must be one of a, b, got 'c'"),
    ],
)
def test_a_bad_value_names_the_variable_the_value_and_what_is_expected(
    read: object, value: str, message: str
) -> None:
    assert callable(read)
    with pytest.raises(SettingError) as caught:
        read({"N": value})
    assert message in str(caught.value)
    assert (caught.value.name, caught.value.raw) == ("N", value.strip())
    assert isinstance(caught.value, ValueError)  # callers that catch ValueError keep working


def test_readers_default_to_the_process_environment(environ: dict[str, str]) -> None:
    environ["KEEL_TEST_SETTING"] = "5"
    assert env_int("KEEL_TEST_SETTING", 1) == 5


# -- the .env loader ---------------------------------------------------------------------------


def test_a_dotenv_file_fills_in_what_the_environment_lacks(tmp_path: Path, environ: dict[str, str]) -> None:
    environ.pop("KEEL_T_NEW", None)
    environ["KEEL_T_SET"] = "from the environment"
    (tmp_path / ".env").write_text("KEEL_T_NEW=from the file\nKEEL_T_SET=from the file\n")
    applied = load_dotenv(tmp_path / ".env")
    assert applied == {"KEEL_T_NEW": "from the file"}
    assert environ["KEEL_T_NEW"] == "from the file"
    assert environ["KEEL_T_SET"] == "from the environment"


def test_boot_and_the_cli_apply_the_root_dotenv(tmp_path: Path, environ: dict[str, str]) -> None:
    environ.pop("KEEL_T_CLI", None)
    (tmp_path / ".env").write_text("KEEL_T_CLI=1\n")
    load_environment(tmp_path)
    assert env_flag("KEEL_T_CLI") is True


def test_a_missing_dotenv_is_nothing_to_apply(tmp_path: Path, environ: dict[str, str]) -> None:
    assert load_dotenv(tmp_path / ".env") == {}


def test_comments_quotes_and_export() -> None:
    text = "\n".join(
        [
            "# a comment",
            "   ",
            "  # an indented comment",
            "PLAIN=value with spaces  ",
            "export EXPORTED=yes",
            'DOUBLE="quoted # not a comment"',
            "SINGLE='single quoted'  # a comment after the quotes",
            "EMPTY=",
            "EQUALS=a=b=c",
            "HASH=abc#def",
            'EMPTYQ=""',
        ]
    )
    assert parse_dotenv(text) == {
        "PLAIN": "value with spaces",
        "EXPORTED": "yes",
        "DOUBLE": "quoted # not a comment",
        "SINGLE": "single quoted",
        "EMPTY": "",
        "EQUALS": "a=b=c",
        "HASH": "abc#def",
        "EMPTYQ": "",
    }


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("JUST_A_WORD", "expected KEY=VALUE"),
        ("=value", "expected KEY=VALUE"),
        ("BAD KEY=1", "expected KEY=VALUE"),
        ("1ABC=1", "expected KEY=VALUE"),
        ('OPEN="never closed', "must end with its closing"),
        ("'a' b", "expected KEY=VALUE"),
        ("Q='a' junk", "must end with its closing"),
    ],
)
def test_a_bad_line_is_an_error_naming_the_file_and_line(
    tmp_path: Path, environ: dict[str, str], line: str, fragment: str
) -> None:
    environ.pop("GOOD", None)
    path = tmp_path / ".env"
    path.write_text(f"# fine\nGOOD=1\n{line}\n")
    with pytest.raises(DotenvError) as caught:
        load_dotenv(path)
    assert str(caught.value).startswith(f"{path}:3: ")
    assert fragment in str(caught.value)
    assert "GOOD" not in environ  # the file is checked whole before any of it applies


def test_the_cli_reports_a_bad_dotenv_line_without_a_traceback(
    tmp_path: Path, environ: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "domains").mkdir()
    (tmp_path / ".env").write_text("NOT A SETTING\n")
    assert main(["--root", str(tmp_path), "migrate", "--status"]) == 1
    assert capsys.readouterr().err == (
        f"keel migrate: {tmp_path / '.env'}:1: expected KEY=VALUE (or a # comment), got 'NOT A SETTING'\n"
    )
