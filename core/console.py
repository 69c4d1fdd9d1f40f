"""Log lines for people at a terminal, and for machines when ``LOG_FORMAT=json``.

One line per record: ``12:00:05 ERROR kernel: message`` (local time, the level, who logged it:
the plugin code's identity, else the standard logger's name without its ``keel.`` prefix). The
level is coloured when the stream is a terminal; ``NO_COLOR`` (any value) turns colour off and
``FORCE_COLOR`` (any value but ``0``) turns it on even through a pipe. ``LOG_FORMAT=json`` gives
one JSON object per line instead: ``{"time", "level", "name", "message"}``, plus ``trace_id`` and
``span_id`` when a span was active.

The logger tool writes its stderr lines through :func:`format_line`; :func:`install` puts the
same format on the root logger for what is logged before the logger tool is set up (a tool whose
``setup()`` fails first), and steps aside once a handler marked ``keel_console`` is installed.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from core.settings import env_choice, env_raw, env_secret, env_str

FORMATS = ("text", "json")
_KEEL_CORE = f"{Path(__file__).resolve().parent}{os.sep}"
_COLOURS = {
    "DEBUG": "\033[2m",
    "INFO": "\033[32m",
    "WARNING": "\033[33m",
    "ERROR": "\033[31m",
    "CRITICAL": "\033[1;31m",
}
_DIM = "\033[2m"
_BOLD = "\033[1m"
_RESET = "\033[0m"


@dataclass(frozen=True)
class Style:
    """How lines are written: ``json`` wins over ``colour``."""

    json: bool = False
    colour: bool = False


def log_format(environ: Mapping[str, str] | None = None) -> str:
    """``LOG_FORMAT`` (``text``, the default, or ``json``); raises ``SettingError`` naming the fix."""
    return env_choice("LOG_FORMAT", "text", FORMATS, environ=environ)


def style_for(stream: TextIO, environ: Mapping[str, str] | None = None) -> Style:
    try:
        as_json = log_format(environ) == "json"
    except ValueError:
        as_json = False  # the logger tool's setup reports the bad value
    force = env_raw("FORCE_COLOR", environ=environ)
    if force and force != "0":
        colour = True
    elif env_secret("NO_COLOR", environ=environ):  # any non-empty value, as no-color.org says
        colour = False
    else:
        isatty = getattr(stream, "isatty", None)
        colour = bool(isatty and isatty())
    return Style(json=as_json, colour=colour)


def short_name(name: str) -> str:
    """``keel.kernel`` -> ``kernel``: every line of Keel's own loggers would otherwise repeat it."""
    return name.removeprefix("keel.") if name != "keel" else name


def format_line(
    level: str,
    message: str,
    created: float,
    name: str,
    trace: tuple[str, str] | None = None,
    *,
    style: Style,
) -> str:
    """One record as one line (a traceback in ``message`` stays on the lines after it)."""
    if style.json:
        record: dict[str, str] = {
            "time": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
            "level": level,
            "name": name,
            "message": message,
        }
        if trace:
            record["trace_id"], record["span_id"] = trace
        return json.dumps(record, ensure_ascii=False)
    clock = datetime.fromtimestamp(created).strftime("%H:%M:%S")
    if style.colour:
        colour = _COLOURS.get(level, "")
        return f"{_DIM}{clock}{_RESET} {colour}{level}{_RESET} {_BOLD}{name}{_RESET}: {message}"
    return f"{clock} {level} {name}: {message}"


def failure_where(error: BaseException, root: Path) -> str:
    """``path:line`` of the innermost frame of ``error`` inside ``root`` (relative to it), else of
    its innermost frame: the line a person fixes is theirs, rarely the library's."""
    frames = traceback.extract_tb(error.__traceback__)
    if isinstance(error, SyntaxError) and error.filename:
        return f"{_relative(error.filename, root)}:{error.lineno}"
    if not frames:
        return ""
    prefix = f"{root}{os.sep}"
    core = f"{root}{os.sep}core{os.sep}"
    own = [f for f in frames if f.filename.startswith(prefix) and not f.filename.startswith(core)]
    not_core = [f for f in frames if not f.filename.startswith(_KEEL_CORE)]  # core raises on a tool's behalf
    frame = (own or not_core or frames)[-1]
    return f"{_relative(frame.filename, root)}:{frame.lineno}"


def _relative(filename: str, root: Path) -> str:
    prefix = f"{root}{os.sep}"
    return filename[len(prefix) :] if filename.startswith(prefix) else filename


class ConsoleHandler(logging.Handler):
    """The early handler: formats records like the logger tool until one marked ``keel_console``
    is on the root logger (the logger tool's), then writes nothing, so no line is written twice."""

    keel_console = False

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        if any(getattr(h, "keel_console", False) for h in logging.getLogger().handlers):
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
            stream = self.stream or sys.stderr
            line = format_line(
                record.levelname, message, record.created, short_name(record.name), style=style_for(stream)
            )
            stream.write(line + "\n")
        except Exception:  # pragma: no cover - logging must never break the caller
            self.handleError(record)


def install() -> None:
    """Put the console format on the root logger (at ``LOG_LEVEL``) until the logger tool takes over."""
    root = logging.getLogger()
    if any(isinstance(h, ConsoleHandler) for h in root.handlers):
        return
    root.addHandler(ConsoleHandler())
    level = env_str("LOG_LEVEL").upper()
    root.setLevel(level if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "INFO")
