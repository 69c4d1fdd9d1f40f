"""ClaudeCliCognition over FakeClaudeCli: real parsing, event mapping and billing, no binary, no money."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from pathlib import Path

import pytest

from core.agents import Agent, StopReason
from core.contracts.cli import CliRun, CliStderr
from core.contracts.types import Message, Role, StreamEventKind
from core.execution.cancellation import CancellationToken
from core.runtime import Budget
from core.testing import FakeClaudeCli, ScriptExhausted, claude_turn, make_test_ctx
from tools.coding_cli.claude import ClaudeCliCognition, claude_usage

SESSIONS = Path(__file__).parent / "sessions"
MODEL = "claude-sonnet-4-5"


def agent(cli: FakeClaudeCli, **options: object) -> Agent:
    return Agent("coder", model=MODEL, cognition=ClaudeCliCognition(spawn=cli, **options))  # type: ignore[arg-type]


async def test_a_recorded_session_maps_to_events_usage_and_budget() -> None:
    cli = FakeClaudeCli.replay(SESSIONS / "adds_endpoint.jsonl")
    ctx = make_test_ctx(budget=Budget(max_cost_usd=Decimal("1")))
    events = [event async for event in agent(cli).stream("Add a health endpoint", ctx)]

    kinds = [event.kind for event in events]
    assert kinds == ["step", "message_delta", "tool_call", "tool_result", "message_delta", "final"]
    assert events[0].tool_result == {"binary": "claude", "session_id": "9b1f3c2e-6a4d-4e8b-9f10-2c3d4e5f6a7b"}
    assert events[2].tool_call is not None and events[2].tool_call.name == "Edit"
    assert events[3].tool_result == "The file /srv/app/routes.py has been updated."
    result = events[-1].result
    assert result.output == "Added GET /health to routes.py."
    # Anthropic convention: input_tokens excludes the cached parts, so it maps across unchanged.
    assert (result.usage.input_tokens, result.usage.cache_read_tokens) == (10, 25930)
    assert (result.usage.cache_write_tokens, result.usage.output_tokens) == (2040, 110)
    assert ctx.budget.spent() == Decimal("0.016400") and ctx.budget.calls == 1
    assert cli.spawns == 1


async def test_argv_carries_model_system_prompt_resume_and_the_budget_left() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="ok")])
    ctx = make_test_ctx(budget=Budget(max_cost_usd=Decimal("0.50")))
    coder = Agent(
        "coder",
        model=MODEL,
        system="Be terse.",
        cognition=ClaudeCliCognition(spawn=cli, resume="sess-1", permission_mode="acceptEdits"),
    )
    await coder.run("go", ctx, context=[Message(Role.USER, "earlier"), Message(Role.ASSISTANT, "noted")])
    argv = cli.argv()
    assert argv[:7] == [
        "claude",
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    assert argv[argv.index("--model") + 1] == MODEL
    assert argv[argv.index("--append-system-prompt") + 1] == "Be terse."
    assert argv[argv.index("--resume") + 1] == "sess-1"
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--max-budget-usd") + 1] == "0.500000"
    sent = json.loads(cli.stdin[0][0])
    text = sent["message"]["content"][0]["text"]
    assert sent["type"] == "user" and "user: earlier" in text and text.endswith("go")


async def test_an_error_result_ends_the_run_and_is_billed() -> None:
    turn = claude_turn(text="", cost_usd="0.02")
    result = dict(turn.lines[-1])  # type: ignore[arg-type]
    result.update(subtype="error_max_turns", is_error=True, result=None)
    cli = FakeClaudeCli.script([CliRun([*turn.lines[:-1], result])])
    ctx = make_test_ctx()
    outcome = await agent(cli).run("go", ctx)
    assert outcome.reason is StopReason.PROVIDER_ERROR
    assert outcome.error is not None and "error_max_turns" in outcome.error
    assert ctx.budget.spent() == Decimal("0.020000")


# ---- malformed sessions: a clear reason, and what was done is billed -----------------------------

ASSISTANT = claude_turn(text="partial work", usage=(1000, 0, 0, 100)).lines[1]
INIT = claude_turn().lines[0]
RESULT = claude_turn(text="finished", cost_usd="0.05").lines[-1]
# What the assistant message's usage costs at the default Sonnet price: 1000 * $3 + 100 * $15 per Mtok.
ESTIMATE = Decimal("0.004500")


@pytest.mark.parametrize(
    ("run", "reason", "spent"),
    [
        pytest.param(
            CliRun([INIT, ASSISTANT, '{"type":"result","subtype":"succ']),
            "line 3 that is not complete JSON",
            ESTIMATE,
            id="truncated-line",
        ),
        pytest.param(
            CliRun([INIT, {"type": "telemetry_v9", "x": 1}, ASSISTANT, RESULT]),
            "unknown type 'telemetry_v9' on line 2",
            Decimal("0.050000"),
            id="unknown-event-type",
        ),
        pytest.param(
            CliRun([INIT, ASSISTANT]),
            "ended without a result event (turn 1)",
            ESTIMATE,
            id="no-final-result",
        ),
        pytest.param(
            CliRun([INIT, ASSISTANT, CliStderr("API Error: 529 overloaded\n")], exit_code=1),
            "exited with code 1 part-way through turn 1: API Error: 529 overloaded",
            ESTIMATE,
            id="non-zero-exit-part-way",
        ),
        pytest.param(
            CliRun([INIT, b'{"type":"assistant","message":{"content":"caf\xe9"}}', ASSISTANT, RESULT]),
            "line 2 that is not valid UTF-8",
            Decimal("0.050000"),
            id="invalid-utf8",
        ),
    ],
)
async def test_a_malformed_session_ends_with_a_clear_reason_and_bills_what_was_done(
    run: CliRun, reason: str, spent: Decimal
) -> None:
    ctx = make_test_ctx()
    outcome = await agent(FakeClaudeCli.script([run])).run("go", ctx)
    assert outcome.reason is StopReason.PROVIDER_ERROR
    assert outcome.error is not None and reason in outcome.error
    assert outcome.output == "partial work"
    assert ctx.budget.spent() == spent and ctx.budget.calls == 1
    assert outcome.usage.cost_usd == float(spent)


def test_usage_reads_the_ttl_buckets() -> None:
    usage = claude_usage(
        {
            "input_tokens": 3,
            "cache_read_input_tokens": 10,
            "cache_creation_input_tokens": 8,
            "cache_creation": {"ephemeral_5m_input_tokens": 5, "ephemeral_1h_input_tokens": 3},
            "output_tokens": 2,
        }
    )
    assert (usage.input_tokens, usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (21, 5, 3)
    assert usage.to_usage().input_tokens == 3


# ---- structured output, budget, cancellation -------------------------------------------------------


@dataclasses.dataclass
class Verdict:
    ok: bool


async def test_an_unparsable_answer_is_re_asked_on_the_same_process_with_the_error() -> None:
    cli = FakeClaudeCli.script(
        [
            claude_turn(text="it is fine", cost_usd="0.01"),
            claude_turn(text='{"ok": true}', cost_usd="0.03", init=False),  # session totals
        ]
    )
    ctx = make_test_ctx()
    coder = Agent("coder", model=MODEL, output_type=Verdict, cognition=ClaudeCliCognition(spawn=cli))
    outcome = await coder.run("judge", ctx)
    assert outcome.parsed == Verdict(ok=True)
    assert cli.spawns == 1 and cli.turns_used == 2
    second = json.loads(cli.stdin[0][1])["message"]["content"][0]["text"]
    assert "could not be used: ValueError: not valid JSON" in second
    assert ctx.budget.spent() == Decimal("0.030000") and ctx.budget.calls == 2


async def test_re_asking_is_bounded() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="nope"), claude_turn(text="still no", init=False)])
    coder = Agent(
        "coder", model=MODEL, output_type=Verdict, cognition=ClaudeCliCognition(spawn=cli, output_retries=1)
    )
    outcome = await coder.run("judge", make_test_ctx())
    assert outcome.reason is StopReason.INVALID_OUTPUT and cli.turns_used == 2


async def test_an_exhausted_budget_refuses_the_spawn() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="x")])
    budget = Budget(max_calls=0)
    outcome = await agent(cli).run("go", make_test_ctx(budget=budget))
    assert outcome.reason is StopReason.BUDGET_EXHAUSTED and cli.spawns == 0


async def test_a_session_past_the_budget_stops_the_run_after_billing_it() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="x", cost_usd="0.20")])
    ctx = make_test_ctx(budget=Budget(max_cost_usd=Decimal("0.10")))
    outcome = await agent(cli).run("go", ctx)
    assert outcome.reason is StopReason.BUDGET_EXHAUSTED and ctx.budget.spent() == Decimal("0.200000")


async def test_cancellation_is_checked_between_lines_and_kills_the_process() -> None:
    token = CancellationToken()
    cli = FakeClaudeCli.replay(SESSIONS / "adds_endpoint.jsonl")
    ctx = make_test_ctx(cancel=token)
    seen = []
    async for event in agent(cli).stream("go", ctx):
        seen.append(event.kind)
        if event.kind == StreamEventKind.TOOL_CALL:
            token.cancel()
    assert seen[-1] == "final" and "tool_result" not in seen


async def test_asking_past_the_recording_raises_script_exhausted() -> None:
    cli = FakeClaudeCli.script([claude_turn(text="x")])
    coder = agent(cli)
    ctx = make_test_ctx()
    await coder.run("one", ctx)
    with pytest.raises(ScriptExhausted):
        await coder.run("two", ctx)
