"""The testing document's two command-line examples, completed into programs and run.

The document shows ``FakeClaudeCli`` and ``FakeCodexCli`` as fragments that build a cognition. Each
test here is that fragment as written (imports translated by the map: ``agentkit.core.testing`` is
``core.testing``; the provider module ``agentkit.models.providers.cli.codex`` is
``tools.coding_cli.codex``: the map puts providers under ``tools/``, and the CLIs are their own tool
rather than part of ``llm``, see ``tools.coding_cli.coding_cli_tool``), followed by a run of an
agent on the cognition, with the printed lines checked.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.agents import Agent
from core.contracts.types import ToolCall
from core.testing import (
    FakeClaudeCli,
    FakeCodexCli,
    FakeLLM,
    ScriptExhausted,
    Turn,
    claude_turn,
    codex_turn,
    make_test_ctx,
)
from tools.coding_cli.claude import ClaudeCliCognition
from tools.coding_cli.codex import CodexCliCognition, CodexCliSession

HERE = Path(__file__).parent


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_fake_claude_cli_replay_and_script(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(HERE)

    # a recorded session, replayed event for event
    cli = FakeClaudeCli.replay(Path("sessions/adds_endpoint.jsonl"))

    async def main() -> None:
        cognition = ClaudeCliCognition(spawn=cli)
        result = await Agent("coder", model="claude-sonnet-4-5", cognition=cognition).run(
            "Add a /health endpoint", make_test_ctx()
        )
        print(result.output)  # Added GET /health to routes.py.
        print(cli.spawns)  # 1

        # or turns you assemble, for a case nobody has recorded
        scripted = FakeClaudeCli.script([claude_turn(text="one")])
        agent = Agent("coder", model="claude-sonnet-4-5", cognition=ClaudeCliCognition(spawn=scripted))
        print((await agent.run("go", make_test_ctx())).output)  # one
        try:
            await agent.run("go again", make_test_ctx())
        except ScriptExhausted as exc:
            print(str(exc).split(".")[0])

    asyncio.run(main())
    assert printed(capsys) == [
        "Added GET /health to routes.py.",
        "1",
        "one",
        "FakeClaudeCli script exhausted: the script has 1 turn(s), but the agent asked for turn 2",
    ]
    assert os.getcwd() == str(HERE)


def test_fake_claude_cli_repeat_last(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        cli = FakeClaudeCli.script([claude_turn(text="again")], repeat_last=True)
        agent = Agent("coder", model="claude-sonnet-4-5", cognition=ClaudeCliCognition(spawn=cli))
        for _ in range(3):
            await agent.run("go", make_test_ctx())
        print(cli.spawns, cli.turns_used)  # 3 3

    asyncio.run(main())
    assert printed(capsys) == ["3 3"]


def test_fake_codex_cli_and_codex_turn(capsys: pytest.CaptureFixture[str]) -> None:
    cli = FakeCodexCli.script(codex_turn(text="done", usage=(1200, 1000, 40)))
    cognition = CodexCliCognition(spawn=cli)

    async def main() -> None:
        result = await Agent("coder", model="gpt-5-codex", cognition=cognition).run("go", make_test_ctx())
        print(result.output)  # done
        usage = result.usage
        print(usage.input_tokens, usage.cache_read_tokens, usage.output_tokens)  # 200 1000 40
        print(cli.spawns, cli.argv()[:3])  # 1 ['codex', 'exec', '--json']

    asyncio.run(main())
    assert printed(capsys) == ["done", "200 1000 40", "1 ['codex', 'exec', '--json']"]


def test_a_three_turn_codex_session_consumes_three_runs(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        cli = FakeCodexCli.answering("one", "two", "three")
        agent = Agent("coder", model="gpt-5-codex", cognition=CodexCliSession(spawn=cli))
        ctx = make_test_ctx()
        print([(await agent.run(task, ctx)).output for task in ("a", "b", "c")])
        print(cli.spawns, [("resume" in cli.argv(n)) for n in range(3)])

    asyncio.run(main())
    assert printed(capsys) == ["['one', 'two', 'three']", "3 [False, True, True]"]


def test_repeat_last_fragment_runs_until_max_iterations() -> None:
    # The document's repeat_last fragment, driven to the end its comment promises.
    from core.agents.cognition import ReActCognition
    from core.testing import FakeTool

    llm = FakeLLM.script(
        [Turn(tool_calls=(ToolCall("c1", "fetch", {}),))],
        repeat_last=True,
    )
    agent = Agent(
        "a", model="fake-model", cognition=ReActCognition(tools=[FakeTool("fetch")], max_iterations=4)
    )
    result = asyncio.run(agent.run("go", make_test_ctx(llm=llm)))
    assert (result.reason, llm.calls) == ("max_iterations", 4)
