"""The command lines the cognitions build use only options the real binaries document.

``help/`` holds ``--help`` as printed by ``@anthropic-ai/claude-code`` 2.1.197 and ``@openai/codex``
0.171.0 (installed with npm into a temporary directory; never run against an API). With
``KEEL_CLI_BIN_DIR`` pointing at a directory holding ``claude`` and ``codex`` (for example
``node_modules/.bin`` after ``npm install @anthropic-ai/claude-code @openai/codex``), the live
``--help`` is read instead, so the check follows a newer release.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from core.agents import Agent
from core.agents.session import AgentRun
from core.contracts.types import Message, Role
from core.runtime import Budget
from core.testing import FakeClaudeCli, FakeCodexCli, make_test_ctx
from tools.coding_cli.claude import ClaudeCliCognition
from tools.coding_cli.codex import CodexCliCognition

HELP = Path(__file__).parent / "help"
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def help_text(binary: str, *args: str, recorded: str) -> str:
    directory = os.environ.get("KEEL_CLI_BIN_DIR")
    if not directory:
        return (HELP / recorded).read_text()
    done = subprocess.run(
        [str(Path(directory) / binary), *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def options(text: str) -> set[str]:
    return set(OPTION.findall(text))


def flags(argv: list[str]) -> set[str]:
    return {part for part in argv if part.startswith("-") and part != "-"}


def a_run(model: str, cognition: object) -> AgentRun:
    agent = Agent("a", model=model, system="sys", cognition=cognition)  # type: ignore[arg-type]
    ctx = make_test_ctx(budget=Budget(max_cost_usd="1"))
    return AgentRun(agent, "task", ctx, [Message(Role.SYSTEM, "sys"), Message(Role.USER, "task")])


def test_claude_argv_uses_documented_options() -> None:
    cognition = ClaudeCliCognition(
        spawn=FakeClaudeCli.script([]), permission_mode="acceptEdits", allowed_tools=["Edit"], resume="s"
    )
    argv = cognition.argv(a_run("claude-sonnet-4-5", cognition))
    documented = options(help_text("claude", recorded="claude_help.txt"))
    assert flags(argv) - documented == set()
    assert {"--input-format", "--output-format", "--max-budget-usd", "--resume"} <= flags(argv)


@pytest.mark.parametrize(
    ("thread", "args", "recorded"),
    [(None, ("exec",), "codex_exec_help.txt"), ("t-1", ("exec", "resume"), "codex_exec_resume_help.txt")],
)
def test_codex_argv_uses_documented_options(thread: str | None, args: tuple[str, ...], recorded: str) -> None:
    cognition = CodexCliCognition(
        spawn=FakeCodexCli.script(), sandbox="workspace-write" if thread is None else None
    )
    argv = cognition.argv("gpt-5-codex", thread)
    assert argv[1 : 1 + len(args)] == list(args)
    text = help_text("codex", *args, recorded=recorded)
    assert flags(argv) - options(text) == set()
    assert "read from stdin" in text  # the trailing "-" prompt
