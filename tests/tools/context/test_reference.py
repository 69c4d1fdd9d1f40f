"""docs/plugin-api.md and AI_CONTEXT.md against the code: committed = generated, and drift is caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import PROJECT, make_root, write
from tools.context import reference
from tools.context.interface import (
    ASYNC,
    ASYNC_CONTEXT,
    ASYNC_ITERATOR,
    PROPERTY,
    SYNC,
    tool_interfaces,
)

FIXTURE_TOOL = '''
    from __future__ import annotations

    from collections.abc import AsyncIterator

    from core import BaseTool


    class Block:
        async def __aenter__(self) -> Block:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None


    class Greetings:
        """A base that is not a tool: what it defines is part of the tool too."""

        def wave(self, times: int = 1) -> str:
            """Wave ``times`` times."""
            return "~" * times


    def loop() -> None:
        return None


    class Greeter(Greetings, BaseTool):
        """Says hello.

        A second paragraph that the reference leaves to the source.
        """

        name = "greeter"
        loop_factory = loop  # a class attribute holding a function is not a method

        async def greet(self, who: str, *, loud: bool = False) -> str:
            """A greeting for ``who``."""
            return who.upper() if loud else who

        async def letters(self, word: str) -> AsyncIterator[str]:
            """Each letter of ``word``."""
            for letter in word:
                yield letter

        def block(self) -> Block:
            """Hold the greeter for a while."""
            return Block()

        def count(self, *words: str, **options: object) -> int:
            return len(words)

        @staticmethod
        def shout(text: str) -> str:
            """``text`` in capitals."""
            return text.upper()

        @property
        def greeted(self) -> int:
            """How many greetings so far."""
            return 0

        async def setup(self) -> None:
            """A lifecycle hook: the kernel's, not the plugin's."""

        def _private(self) -> None:
            return None
'''


def fixture_root(tmp_path: Path) -> Path:
    root = make_root(tmp_path, tools=("event_bus",))
    write(root, "tools/greeter/greeter_tool.py", FIXTURE_TOOL)
    return root


def test_the_committed_reference_and_ai_context_are_what_the_code_generates() -> None:
    stale = reference.drifted(PROJECT)
    assert stale == [], "\n".join(f"{name} drifted; run `make docs`:\n{diff}" for name, diff in stale)


def test_a_tool_is_described_from_its_own_signatures_with_how_each_member_is_called(
    tmp_path: Path,
) -> None:
    (greeter,) = [t for t in tool_interfaces(fixture_root(tmp_path)) if t.name == "greeter"]
    assert greeter.doc == "Says hello."
    assert greeter.source == "tools/greeter/greeter_tool.py"
    described = {m.name: (m.kind, m.signature(), m.doc) for m in greeter.members}
    assert described == {
        "block": (ASYNC_CONTEXT, "block() -> Block", "Hold the greeter for a while."),
        "count": (SYNC, "count(*words: str, **options: object) -> int", ""),
        "greet": (ASYNC, "greet(who: str, *, loud: bool = False) -> str", "A greeting for ``who``."),
        "greeted": (PROPERTY, "greeted: int", "How many greetings so far."),
        "letters": (ASYNC_ITERATOR, "letters(word: str) -> AsyncIterator[str]", "Each letter of ``word``."),
        "shout": (SYNC, "shout(text: str) -> str", "``text`` in capitals."),
        "wave": (SYNC, "wave(times: int = 1) -> str", "Wave ``times`` times."),
    }


def test_the_reference_marks_each_call_the_way_a_plugin_writes_it(tmp_path: Path) -> None:
    text = reference.plugin_api(fixture_root(tmp_path))
    assert "- `await greeter.greet(who: str, *, loud: bool = False) -> str` — A greeting for ``who``." in text
    assert "- `async for ... in greeter.letters(word: str) -> AsyncIterator[str]`" in text
    assert "- `async with greeter.block() -> Block`" in text
    assert "- `greeter.greeted: int` (attribute)" in text
    assert "- `greeter.shout(text: str) -> str`" in text
    assert "| `greeter` | Says hello. |" in text
    assert "| `event.payload` | `Any` |" in text, "the event's fields come from the bus's source"


def test_check_fails_naming_both_files_when_a_tool_signature_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fixture_root(tmp_path)
    assert reference.main(["--root", str(root)]) == 0
    assert reference.main(["--check", "--root", str(root)]) == 0
    capsys.readouterr()

    tool = root / "tools" / "greeter" / "greeter_tool.py"
    tool.write_text(tool.read_text().replace("who: str, *, loud", "who: str, times: int, *, loud"))
    assert reference.main(["--check", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert "docs/plugin-api.md is out of date with the code: run `make docs`" in err
    assert "AI_CONTEXT.md is out of date with the code: run `make docs`" in err
    assert "+- `await greeter.greet(who: str, times: int, *, loud: bool = False) -> str`" in err
    assert "-- `await greeter.greet(who: str, *, loud: bool = False) -> str`" in err

    assert reference.main(["--root", str(root)]) == 0
    assert reference.main(["--check", "--root", str(root)]) == 0


def test_check_as_a_command_exits_1_on_drift(tmp_path: Path) -> None:
    root = fixture_root(tmp_path)
    command = [sys.executable, "-m", "tools.context.reference", "--root", str(root)]
    assert subprocess.run(command, cwd=PROJECT, capture_output=True, timeout=120).returncode == 0
    (root / "docs" / "plugin-api.md").write_text("hand edit\n")
    checked = subprocess.run([*command, "--check"], cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1
    assert "docs/plugin-api.md is out of date" in checked.stderr
    assert "AI_CONTEXT.md" not in checked.stderr.splitlines()[0]


def test_two_renders_of_one_tree_are_the_same_bytes_wherever_it_lives(tmp_path: Path) -> None:
    first = reference.ai_context(fixture_root(tmp_path / "a"))
    second = reference.ai_context(fixture_root(tmp_path / "b"))
    assert first == second
    assert str(tmp_path) not in first
