"""Reading configuration from the environment, with an optional ``.env`` at the project root.

This is the one module that reads ``os.environ`` (tests/core/test_settings_guard.py holds every
other module to that), so a bad value is always reported the same way: the variable, the value,
and what would have been accepted. Every reader treats an unset or blank variable as "use the
default", and takes an optional ``environ`` mapping so a config loader can be tested on a plain
dict instead of the process environment.

Variables already set in the environment win over the ``.env`` file, so a deployment can always
override it. Parsing is deliberately small: ``KEY=VALUE`` lines, ``#`` comments, optional
``export`` and matching quotes; anything else is an error naming the file and line, because a
silently skipped line is a setting that silently does not apply.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SettingError(ValueError):
    """A variable is set to something its reader cannot use."""

    def __init__(self, name: str, raw: str, expected: str) -> None:
        super().__init__(f"{name} must be {expected}, got {raw!r}")
        self.name = name
        self.raw = raw
        self.expected = expected


class DotenvError(ValueError):
    """A ``.env`` line is not ``KEY=VALUE``, a comment or blank."""


# -- the .env file -----------------------------------------------------------------------------


def load_dotenv(path: Path) -> dict[str, str]:
    """Apply ``path`` to ``os.environ`` without overriding; return what it set."""
    if not path.is_file():
        return {}
    parsed = parse_dotenv(path.read_text(encoding="utf-8"), source=str(path))
    applied: dict[str, str] = {}
    for key, value in parsed.items():
        if key not in os.environ:
            os.environ[key] = value
            applied[key] = value
    return applied


def parse_dotenv(text: str, *, source: str = ".env") -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``text``; :class:`DotenvError` names ``source`` and the bad line."""
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, equals, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not _KEY.fullmatch(key):
            raise DotenvError(f"{source}:{number}: expected KEY=VALUE (or a # comment), got {raw.strip()!r}")
        pairs[key] = _dotenv_value(value, f"{source}:{number}")
    return pairs


def _dotenv_value(value: str, where: str) -> str:
    if not value or value[0] not in "'\"":
        return value
    quote = value[0]
    end = value.find(quote, 1)
    rest = value[end + 1 :].strip() if end > 0 else ""
    if end < 0 or (rest and not rest.startswith("#")):
        raise DotenvError(
            f"{where}: a quoted value must end with its closing {quote} (only a # comment may follow), "
            f"got {value!r}"
        )
    return value[1:end]


# -- typed readers -----------------------------------------------------------------------------


def env_raw(name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable stripped of surrounding space, or ``None`` when it is unset or blank."""
    source = os.environ if environ is None else environ
    value = source.get(name, "").strip()
    return value or None


def env_str(name: str, default: str = "", *, environ: Mapping[str, str] | None = None) -> str:
    raw = env_raw(name, environ=environ)
    return default if raw is None else raw


def env_secret(name: str, *, environ: Mapping[str, str] | None = None) -> str:
    """The variable exactly as set (no stripping): a password may begin or end with a space."""
    source = os.environ if environ is None else environ
    return source.get(name, "")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    unit: str = "",
    environ: Mapping[str, str] | None = None,
) -> int:
    raw = env_raw(name, environ=environ)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not _within(value, minimum, maximum, above=False):
        raise SettingError(name, raw, _expected("a whole number", unit, minimum, maximum, above=False))
    return value


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = 0.0,
    maximum: float | None = None,
    above: bool = False,
    unit: str = "",
    environ: Mapping[str, str] | None = None,
) -> float:
    """A number (not NaN); ``above`` makes ``minimum`` exclusive. Non-negative unless told otherwise."""
    raw = env_raw(name, environ=environ)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or not _within(value, minimum, maximum, above=above):
        raise SettingError(name, raw, _expected("a number", unit, minimum, maximum, above=above))
    return value


def env_duration(
    name: str,
    default: float,
    *,
    positive: bool = False,
    finite: bool = False,
    environ: Mapping[str, str] | None = None,
) -> float:
    """Seconds: at least 0, or above 0 when ``positive``; ``finite`` refuses ``inf``."""
    value = env_float(name, default, minimum=0.0, above=positive, unit="seconds", environ=environ)
    if finite and math.isinf(value):
        expected = _expected("a finite number", "seconds", 0.0, None, above=positive)
        raise SettingError(name, env_str(name, environ=environ), expected)
    return value


def env_flag(name: str, default: bool = False, *, environ: Mapping[str, str] | None = None) -> bool:
    raw = env_raw(name, environ=environ)
    if raw is None:
        return default
    word = raw.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SettingError(name, raw, "true or false (1/0, yes/no, on/off)")


def env_choice(
    name: str, default: str, allowed: Collection[str], *, environ: Mapping[str, str] | None = None
) -> str:
    """One of ``allowed`` (compared in lower case)."""
    raw = env_raw(name, environ=environ)
    if raw is None:
        return default
    value = raw.lower()
    if value not in allowed:
        raise SettingError(name, raw, f"one of {', '.join(sorted(allowed))}")
    return value


def env_list(
    name: str,
    default: tuple[str, ...] = (),
    *,
    lower: bool = False,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Comma-separated items, blanks dropped."""
    raw = env_raw(name, environ=environ)
    if raw is None:
        return default
    items = (item.strip() for item in raw.split(","))
    return tuple(item.lower() if lower else item for item in items if item)


def env_set(name: str, value: str) -> None:
    """Set a variable for this process and its children (``keel run --watch`` turns the watcher on)."""
    os.environ[name] = value


def _within(value: float, minimum: float | None, maximum: float | None, *, above: bool) -> bool:
    if minimum is not None and (value <= minimum if above else value < minimum):
        return False
    return maximum is None or value <= maximum


def _expected(kind: str, unit: str, minimum: float | None, maximum: float | None, *, above: bool) -> str:
    text = f"{kind} of {unit}" if unit else kind
    low, high = _show(minimum), _show(maximum)
    if minimum is not None and maximum is not None and not above:
        return f"{text} between {low} and {high}"
    bounds = [f"above {low}" if above else f"at least {low}"] if minimum is not None else []
    bounds += [f"at most {high}"] if maximum is not None else []
    return ", ".join([text, *bounds])


def _show(number: float | None) -> str:
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)
