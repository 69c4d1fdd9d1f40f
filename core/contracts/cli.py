"""The spawn seam: how a cognition that drives a coding-agent CLI launches and talks to it.

A command-line coding agent (``claude``, ``codex``) is not an ``LLMPort``: it is a process that reads
a prompt and writes JSON lines. So the seam a cognition depends on is the spawn itself. A
``CliSpawnPort`` takes a ``CliInvocation`` (argv, working directory, extra environment) and returns
a ``CliProcess``; the cognition writes to its stdin, reads its stdout a line at a time, and waits for
its exit code. The real spawner (a subprocess) lives in a tool; the offline doubles in
``core.testing``. Both speak the value types below, so a recorded spawn is the same value whichever
side produced it.

Choices made here:

* ``CliRun`` is what one spawn wrote: its stdout lines in order and its exit code. A line is a
  mapping (one JSON event, written as a single line), a ``str`` (a raw line, which is how a
  truncated or otherwise broken line is expressed) or ``bytes`` (the only way to express a line that
  is not valid UTF-8). A ``CliStderr`` in the sequence is a write to stderr at that point.
* ``CliProcess.readline()`` returns the next stdout line as bytes, newline included when the process
  wrote one, and ``b""`` at the end of the stream, like ``asyncio.StreamReader.readline``.
* ``stderr_text()`` is what the process has written to stderr so far, decoded leniently: it is only
  ever read to explain a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from core.serialization import FrozenDict, freeze_mapping

__all__ = [
    "CliInvocation",
    "CliLine",
    "CliProcess",
    "CliRun",
    "CliSpawnPort",
    "CliStderr",
    "encode_line",
]

_set = object.__setattr__


def _empty_env() -> Mapping[str, str]:
    return FrozenDict()


@dataclass(frozen=True, slots=True)
class CliInvocation:
    """One launch of a CLI: the argv, the working directory, and environment variables to add."""

    argv: Sequence[str]
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=_empty_env)

    def __post_init__(self) -> None:
        argv = tuple(self.argv)
        if not argv or not all(isinstance(part, str) for part in argv):
            raise ValueError(f"a CLI invocation needs a non-empty argv of strings, got {self.argv!r}")
        _set(self, "argv", argv)
        _set(self, "env", freeze_mapping(self.env))

    def __hash__(self) -> int:
        return hash((self.argv, self.cwd))


@dataclass(frozen=True, slots=True)
class CliStderr:
    """A write to stderr, placed among a recorded run's stdout lines where it happened."""

    text: str


CliLine = Mapping[str, Any] | str | bytes | CliStderr


@dataclass(frozen=True, slots=True)
class CliRun:
    """What one spawn wrote (stdout lines, stderr writes) and the code it exited with."""

    lines: Sequence[CliLine] = ()
    exit_code: int = 0

    def __post_init__(self) -> None:
        frozen: list[CliLine] = []
        for line in self.lines:
            if isinstance(line, Mapping):
                frozen.append(freeze_mapping(line))
            elif isinstance(line, str | bytes | CliStderr):
                frozen.append(line)
            else:
                raise TypeError(
                    f"a CLI line is a mapping, str, bytes or CliStderr, got {type(line).__name__}"
                )
        _set(self, "lines", tuple(frozen))

    def __hash__(self) -> int:
        return hash((len(self.lines), self.exit_code))

    @property
    def stdout(self) -> tuple[bytes, ...]:
        """The stdout lines as the process would write them, each ending in a newline."""
        return tuple(encode_line(line) for line in self.lines if not isinstance(line, CliStderr))

    @classmethod
    def of(cls, lines: Iterable[CliLine] | CliRun, exit_code: int = 0) -> CliRun:
        """``lines`` as a run (a ``CliRun`` is returned as it is)."""
        return lines if isinstance(lines, CliRun) else cls(tuple(lines), exit_code)


def encode_line(line: Mapping[str, Any] | str | bytes) -> bytes:
    """One stdout line as bytes: an event as compact JSON, a ``str`` as UTF-8, ``bytes`` as given.

    A newline is appended unless the line already ends in one. A ``str`` or ``bytes`` line is how a
    test writes a broken line on purpose, so neither is checked.
    """
    if isinstance(line, bytes):
        data = line
    elif isinstance(line, str):
        data = line.encode("utf-8")
    else:
        data = json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return data if data.endswith(b"\n") else data + b"\n"


@runtime_checkable
class CliProcess(Protocol):
    """A launched CLI: stdin to write, stdout to read line by line, an exit code to wait for."""

    async def readline(self) -> bytes: ...

    async def write(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...

    def stderr_text(self) -> str: ...


@runtime_checkable
class CliSpawnPort(Protocol):
    """Launches a CLI process for an invocation."""

    async def __call__(self, invocation: CliInvocation) -> CliProcess: ...
