"""FakeClaudeCli and FakeCodexCli: the spawn seam replayed, with the same exhaustion rule as FakeLLM."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.contracts.cli import CliInvocation, CliLine, CliProcess, CliRun, CliSpawnPort, CliStderr
from core.testing import (
    FakeClaudeCli,
    FakeCodexCli,
    ScriptExhausted,
    claude_turn,
    codex_turn,
)

CLAUDE = CliInvocation(["claude", "-p"])
CODEX = CliInvocation(["codex", "exec", "--json", "-"])
HELLO = b'{"type":"user","message":{"role":"user","content":"hi"}}\n'


def event(line: CliLine) -> Mapping[str, Any]:
    """``line`` as the JSON event it must be (a line can also be raw text, bytes or stderr)."""
    assert isinstance(line, Mapping), line
    return line


async def drain(process: CliProcess) -> list[bytes]:
    lines = []
    while line := await process.readline():
        lines.append(line)
    return lines


def types(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["type"] for line in lines]


def test_both_doubles_satisfy_the_spawn_port() -> None:
    assert isinstance(FakeClaudeCli.script([]), CliSpawnPort)
    assert isinstance(FakeCodexCli.script(), CliSpawnPort)


async def test_claude_serves_one_turn_per_message_from_one_spawn() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="one"), claude_turn(text="two", init=False)])
    process = await cli(CLAUDE)
    assert isinstance(process, CliProcess)
    await process.write(HELLO)
    first = [await process.readline() for _ in range(3)]
    assert types(first) == ["system", "assistant", "result"]
    with pytest.raises(RuntimeError, match="no message pending"):
        await process.readline()
    await process.write(HELLO)
    second = [await process.readline() for _ in range(2)]
    assert json.loads(second[-1])["result"] == "two"
    await process.close_stdin()
    assert await process.readline() == b""
    assert await process.wait() == 0
    assert (cli.spawns, cli.turns_used) == (1, 2)
    assert cli.stdin == [[HELLO, HELLO]]
    assert cli.argv() == ["claude", "-p"]


async def test_claude_script_that_runs_out_raises_naming_both_numbers() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="only")])
    process = await cli(CLAUDE)
    await process.write(HELLO)
    await drain_turn(process)
    with pytest.raises(ScriptExhausted, match=r"has 1 turn\(s\), but the agent asked for turn 2"):
        await process.write(HELLO)
    assert issubclass(ScriptExhausted, BaseException) and not issubclass(ScriptExhausted, Exception)


async def drain_turn(process: CliProcess) -> None:
    while json.loads(await process.readline())["type"] != "result":
        pass


async def test_claude_repeat_last_replays_the_final_turn() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="again")], repeat_last=True)
    process = await cli(CLAUDE)
    for _ in range(3):
        await process.write(HELLO)
        await drain_turn(process)
    assert cli.turns_used == 3


async def test_claude_turn_without_result_ends_the_process_with_its_exit_code() -> None:
    cli = FakeClaudeCli.script([CliRun([{"type": "system", "subtype": "init"}, CliStderr("boom\n")], 3)])
    process = await cli(CLAUDE)
    await process.write(HELLO)
    assert types(await drain(process)) == ["system"]
    assert await process.wait() == 3
    assert process.stderr_text() == "boom\n"


def test_replay_splits_a_recording_into_turns_after_each_result(tmp_path: Path) -> None:
    recording = tmp_path / "s.jsonl"
    recording.write_bytes(
        b'{"type":"system","subtype":"init"}\n{"type":"result","subtype":"success","result":"a"}\n\n'
        b'{"type":"assistant","mess\n\xff\xfe\n'
    )
    cli = FakeClaudeCli.replay(recording)
    turns = cli._runs
    assert len(turns) == 2
    assert [event(line)["type"] for line in turns[0].lines] == ["system", "result"]
    assert turns[1].lines == ('{"type":"assistant","mess', b"\xff\xfe")


async def test_codex_spawn_is_a_turn_and_argv_is_recorded() -> None:
    cli = FakeCodexCli.answering("one", "two")
    first = await cli(CODEX)
    assert types(await drain(first)) == [
        "thread.started",
        "turn.started",
        "item.completed",
        "turn.completed",
    ]
    assert await first.wait() == 0
    await cli(CliInvocation(["codex", "exec", "resume", "t", "-"]))
    assert cli.spawns == 2
    assert cli.argv() == ["codex", "exec", "resume", "t", "-"]
    assert cli.argv(0) == list(CODEX.argv)
    with pytest.raises(ScriptExhausted, match=r"has 2 turn\(s\), but the agent asked for turn 3"):
        await cli(CODEX)


async def test_codex_turn_keeps_the_cli_convention_and_the_event_order() -> None:
    run = codex_turn(
        text="done", usage=(1200, 1000, 40), thread_id="t-1", items=[{"type": "command_execution"}]
    )
    kinds = [event(line)["type"] for line in run.lines]
    assert kinds == [
        "thread.started",
        "turn.started",
        "item.started",
        "item.completed",
        "item.completed",
        "turn.completed",
    ]
    assert run.lines[0] == {"type": "thread.started", "thread_id": "t-1"}
    assert event(run.lines[-1])["usage"] == {
        "input_tokens": 1200,
        "cached_input_tokens": 1000,
        "output_tokens": 40,
    }


async def test_killed_process_ends_at_once() -> None:
    cli = FakeCodexCli.script(codex_turn(text="x"))
    process = await cli(CODEX)
    process.kill()
    assert await process.readline() == b""
    assert await process.wait() == -9


def test_argv_before_any_spawn_is_an_index_error() -> None:
    with pytest.raises(IndexError, match="not been spawned"):
        FakeCodexCli.script().argv()


def test_value_types_are_frozen_and_checked() -> None:
    run = CliRun([{"type": "x", "nested": {"a": [1]}}, "raw", b"\xff", CliStderr("e")])
    with pytest.raises(TypeError):
        event(run.lines[0])["nested"]["a"].append(2)
    assert run.stdout == (b'{"type":"x","nested":{"a":[1]}}\n', b"raw\n", b"\xff\n")
    with pytest.raises(TypeError, match="CLI line"):
        CliRun([42])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="non-empty argv"):
        CliInvocation([])
    invocation = CliInvocation(["a"], env={"K": "v"})
    with pytest.raises(TypeError):
        invocation.env["K"] = "w"  # type: ignore[index]
    assert hash(invocation) == hash(CliInvocation(["a"], env={"K": "v"}))
