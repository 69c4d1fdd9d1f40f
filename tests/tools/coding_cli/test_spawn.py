"""SubprocessSpawn launches a real process; a stand-in ``claude`` script drives the cognition end to end."""

from __future__ import annotations

import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from core.agents import Agent, StopReason
from core.contracts.cli import CliInvocation, CliProcess, CliSpawnPort
from core.testing import make_test_ctx
from tools.coding_cli.claude import ClaudeCliCognition
from tools.coding_cli.spawn import SubprocessSpawn

STAND_IN = textwrap.dedent(
    """
    import json, sys
    print("starting", file=sys.stderr, flush=True)
    print(json.dumps({"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"}), flush=True)
    for line in sys.stdin:
        task = json.loads(line)["message"]["content"][0]["text"]
        if task == "crash":
            print("fatal: overloaded", file=sys.stderr, flush=True)
            sys.exit(2)
        content = [{"type": "text", "text": task.upper()}]
        answer = {"type": "assistant", "message": {"id": "m1", "content": content}}
        print(json.dumps(answer), flush=True)
        usage = {"input_tokens": 3, "output_tokens": 2}
        print(json.dumps({"type": "result", "subtype": "success", "result": task.upper(),
                          "total_cost_usd": 0.001, "usage": usage}), flush=True)
    """
)


@pytest.fixture
def stand_in(tmp_path: Path) -> list[str]:
    script = tmp_path / "claude_stand_in.py"
    script.write_text(STAND_IN)
    return [sys.executable, str(script)]


async def test_a_subprocess_reads_writes_and_exits(stand_in: list[str]) -> None:
    spawn = SubprocessSpawn()
    assert isinstance(spawn, CliSpawnPort)
    process = await spawn(CliInvocation(stand_in, env={"KEEL_TEST": "1"}))
    assert isinstance(process, CliProcess)
    assert b'"init"' in await process.readline()
    await process.write(b'{"message": {"content": [{"text": "hi"}]}}\n')
    assert b"HI" in await process.readline()
    await process.close_stdin()
    assert b'"result"' in await process.readline()
    assert await process.readline() == b""
    assert await process.wait() == 0
    assert "starting" in process.stderr_text()


async def test_a_missing_binary_is_named() -> None:
    with pytest.raises(FileNotFoundError, match="no-such-claude-binary"):
        await SubprocessSpawn()(CliInvocation(["no-such-claude-binary"]))


async def test_the_cognition_drives_a_real_process(stand_in: list[str]) -> None:
    cognition = ClaudeCliCognition()
    # The stand-in takes none of claude's flags, so it is launched with its own command line.
    cognition.argv = lambda run: [*stand_in]  # type: ignore[method-assign]
    ctx = make_test_ctx()
    result = await Agent("coder", model="m", cognition=cognition).run("make it loud", ctx)
    assert result.output == "MAKE IT LOUD"
    assert ctx.budget.spent() == Decimal("0.001000")


async def test_a_real_process_exiting_part_way_is_a_provider_error(stand_in: list[str]) -> None:
    cognition = ClaudeCliCognition()
    cognition.argv = lambda run: [*stand_in]  # type: ignore[method-assign]
    result = await Agent("coder", model="m", cognition=cognition).run("crash", make_test_ctx())
    assert result.reason is StopReason.PROVIDER_ERROR
    assert result.error == "claude exited with code 2 part-way through turn 1: starting fatal: overloaded"
