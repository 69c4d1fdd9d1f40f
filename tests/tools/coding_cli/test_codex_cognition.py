"""CodexCliCognition and CodexCliSession over FakeCodexCli: a spawn is a turn, a session resumes."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest

from core.agents import Agent, StopReason
from core.contracts.cli import CliLine, CliRun, CliStderr
from core.runtime import Budget
from core.testing import FakeCodexCli, ScriptExhausted, codex_turn, make_test_ctx
from tools.coding_cli.codex import CodexCliCognition, CodexCliSession

SESSIONS = Path(__file__).parent / "sessions"
MODEL = "gpt-5-codex"
THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"


def recorded() -> CliRun:
    import json

    lines = (SESSIONS / "codex_runs_tests.jsonl").read_text().splitlines()
    return CliRun([json.loads(line) for line in lines])


async def test_a_turn_maps_items_to_events_and_converts_the_usage() -> None:
    cli = FakeCodexCli.script(recorded())
    ctx = make_test_ctx(budget=Budget(max_cost_usd=Decimal("1")))
    coder = Agent("coder", model=MODEL, cognition=CodexCliCognition(spawn=cli))
    events = [event async for event in coder.stream("run the tests", ctx)]
    assert [e.kind for e in events] == ["step", "tool_call", "tool_result", "message_delta", "final"]
    assert events[0].tool_result == {"binary": "codex", "thread_id": THREAD}
    call = events[1].tool_call
    assert call is not None and (call.name, call.arguments) == (
        "command_execution",
        {"command": "bash -lc 'pytest -q'"},
    )
    assert events[2].tool_result["aggregated_output"] == "12 passed in 0.41s\n"
    result = events[-1].result
    assert result.output == "All 12 tests pass."
    # codex counts the cached prefix inside input_tokens; Keel's Usage does not.
    assert (result.usage.input_tokens, result.usage.cache_read_tokens, result.usage.output_tokens) == (
        315,
        24448,
        122,
    )
    # 315 * $1.25 + 24448 * $0.125 + 122 * $10 per Mtok
    assert ctx.budget.spent() == Decimal("0.004670")
    assert cli.argv() == ["codex", "exec", "--json", "--skip-git-repo-check", "--model", MODEL, "-"]
    assert cli.stdin == [[b"run the tests"]]


async def test_usage_in_the_cli_convention_is_converted_by_the_cognition() -> None:
    cli = FakeCodexCli.script(codex_turn(text="done", usage=(1200, 1000, 40)))
    result = await Agent("c", model=MODEL, cognition=CodexCliCognition(spawn=cli)).run("go", make_test_ctx())
    assert (result.usage.input_tokens, result.usage.cache_read_tokens, result.usage.output_tokens) == (
        200,
        1000,
        40,
    )


async def test_a_session_of_three_runs_is_three_spawns_resuming_one_thread() -> None:
    cli = FakeCodexCli.answering("one", "two", "three")
    session = CodexCliSession(spawn=cli)
    coder = Agent("coder", model=MODEL, cognition=session)
    ctx = make_test_ctx()
    outputs = [(await coder.run(task, ctx)).output for task in ("a", "b", "c")]
    assert outputs == ["one", "two", "three"]
    assert cli.spawns == 3 and session.thread_id == THREAD
    assert "resume" not in cli.argv(0)
    assert cli.argv(1)[:3] == ["codex", "exec", "resume"] and cli.argv(1)[-2:] == [THREAD, "-"]
    with pytest.raises(ScriptExhausted):
        await coder.run("d", ctx)


async def test_a_session_resumes_a_thread_after_a_restart() -> None:
    first = CodexCliSession(spawn=FakeCodexCli.answering("started"))
    await Agent("c", model=MODEL, cognition=first).run("a", make_test_ctx())
    saved = first.thread_id
    cli = FakeCodexCli.answering("continued")
    restarted = CodexCliSession(spawn=cli, thread_id=saved)
    assert (
        await Agent("c", model=MODEL, cognition=restarted).run("b", make_test_ctx())
    ).output == "continued"
    assert cli.argv()[-2:] == [saved, "-"]


async def test_a_one_shot_cognition_starts_a_fresh_thread_every_run() -> None:
    cli = FakeCodexCli.answering("one", "two")
    coder = Agent("c", model=MODEL, cognition=CodexCliCognition(spawn=cli))
    await coder.run("a", make_test_ctx())
    await coder.run("b", make_test_ctx())
    assert "resume" not in cli.argv(0) and "resume" not in cli.argv(1)


async def test_the_system_prompt_is_written_ahead_of_the_task() -> None:
    cli = FakeCodexCli.answering("ok")
    await Agent("c", model=MODEL, system="Only edit src/.", cognition=CodexCliCognition(spawn=cli)).run(
        "fix it", make_test_ctx()
    )
    assert cli.stdin[0] == [b"Only edit src/.\n\nfix it"]


async def test_a_failed_turn_ends_the_run_with_codex_s_message() -> None:
    run = CliRun(
        [
            {"type": "thread.started", "thread_id": THREAD},
            {"type": "turn.started"},
            {"type": "error", "message": "stream disconnected"},
            {"type": "turn.failed", "error": {"message": "usage limit reached"}},
        ],
        exit_code=1,
    )
    ctx = make_test_ctx()
    outcome = await Agent("c", model=MODEL, cognition=CodexCliCognition(spawn=FakeCodexCli.script(run))).run(
        "go", ctx
    )
    assert outcome.reason is StopReason.PROVIDER_ERROR
    assert outcome.error == "codex reported the turn failed: usage limit reached"
    assert ctx.budget.calls == 1  # the call counts, with no tokens: codex reported none


MESSAGE = {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "half done"}}
COMPLETED = codex_turn(usage=(2000, 0, 100)).lines[-1]
# 2000 * $1.25 + 100 * $10 per Mtok
COST = Decimal("0.003500")


@pytest.mark.parametrize(
    ("lines", "exit_code", "reason", "spent"),
    [
        pytest.param(
            [MESSAGE, '{"type":"turn.completed","usage":{"input_to'],
            0,
            "line 4 that is not complete JSON",
            Decimal(0),
            id="truncated-line",
        ),
        pytest.param(
            [MESSAGE, {"type": "session.configured"}, COMPLETED],
            0,
            "unknown type 'session.configured' on line 4",
            COST,
            id="unknown-event-type",
        ),
        pytest.param(
            [MESSAGE], 0, "ended without a turn.completed event (turn 1)", Decimal(0), id="no-final-result"
        ),
        pytest.param(
            [MESSAGE, CliStderr("thread 'main' panicked\n")],
            101,
            "exited with code 101 part-way through turn 1: thread 'main' panicked",
            Decimal(0),
            id="non-zero-exit-part-way",
        ),
        pytest.param(
            [b'{"type":"item.completed","item":{"type":"agent_message","text":"\xc3("}}', MESSAGE, COMPLETED],
            0,
            "line 3 that is not valid UTF-8",
            COST,
            id="invalid-utf8",
        ),
    ],
)
async def test_a_malformed_session_ends_with_a_clear_reason_and_bills_what_was_done(
    lines: list[CliLine], exit_code: int, reason: str, spent: Decimal
) -> None:
    run = CliRun(
        [{"type": "thread.started", "thread_id": THREAD}, {"type": "turn.started"}, *lines], exit_code
    )
    ctx = make_test_ctx()
    outcome = await Agent("c", model=MODEL, cognition=CodexCliCognition(spawn=FakeCodexCli.script(run))).run(
        "go", ctx
    )
    assert outcome.reason is StopReason.PROVIDER_ERROR
    assert outcome.error is not None and reason in outcome.error
    assert outcome.output == "half done"
    assert ctx.budget.spent() == spent and ctx.budget.calls == 1


@dataclasses.dataclass
class Plan:
    steps: list[str]


async def test_an_unparsable_answer_is_re_asked_as_a_resumed_turn() -> None:
    cli = FakeCodexCli.answering("here is my plan", '{"steps": ["a", "b"]}')
    coder = Agent("c", model=MODEL, output_type=Plan, cognition=CodexCliCognition(spawn=cli))
    outcome = await coder.run("plan it", make_test_ctx())
    assert outcome.parsed == Plan(steps=["a", "b"])
    assert cli.spawns == 2 and cli.argv(1)[-2:] == [THREAD, "-"]
    assert b"could not be used" in cli.stdin[1][0]
