"""Every runnable example of the testing document, translated by the import map, prints what it says.

Each test is the document's example as written (``agentkit.*`` read as ``core.*``), run the way the
document runs it (``asyncio.run(main())``), with its stdout compared line by line. The two examples
of the kernel document that are built on ``core.testing`` are here too. The command-line doubles
examples (``FakeClaudeCli`` / ``FakeCodexCli``) need the CLI cognitions of the ``coding_cli`` tool, so they
run in ``tests/tools/coding_cli/test_cli_doc_examples.py``.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from core.agents import Agent
from core.agents.cognition import ReActCognition
from core.contracts.middleware import Call
from core.contracts.ports import FetchResponse, SearchHit
from core.contracts.types import ChatRequest, Message, Scope, ToolCall
from core.policies import memoize, meter, retry
from core.runtime import Budget, RunContext
from core.runtime.observers import CollectingObserver
from core.state.memory import MemoryItem
from core.state.stores import InMemoryStore
from core.testing import (
    FakeClock,
    FakeCtx,
    FakeFetch,
    FakeLLM,
    FakeMemory,
    FakeSearch,
    FakeTool,
    RecordingTracer,
    ScriptExhausted,
    Turn,
    make_test_ctx,
)


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_the_smallest_thing_that_works(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        ctx = make_test_ctx(llm=FakeLLM("The cert expired on 2026-08-01."))
        result = await Agent("analyst", model="fake-model").run("Why did the deploy fail?", ctx)
        print(result.output)  # The cert expired on 2026-08-01.
        print(result.usage.input_tokens)  # 10

    asyncio.run(main())
    assert printed(capsys) == ["The cert expired on 2026-08-01.", "10"]


def test_make_test_ctx_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        ctx = make_test_ctx(
            llm=FakeLLM("ok"),
            scope=Scope(org_id=7, domain_id=2),
            budget=Budget(max_cost_usd=Decimal("0.10"), max_calls=3),
            correlation_id="run-42",
            autonomy="manual",
        )
        print(ctx.correlation_id, ctx.autonomy, ctx.scope.key())
        # run-42 manual org7:dom2

        await Agent("a", model="fake-model").run("go", ctx)

    asyncio.run(main())
    assert printed(capsys) == ["run-42 manual org7:dom2"]


def test_fake_llm_dict_of_substrings(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        llm = FakeLLM({"weather": "It is raining.", "price": "$15/Mtok"})
        ctx = make_test_ctx(llm=llm)
        agent = Agent("a", model="fake-model")

        print(repr((await agent.run("what is the weather", ctx)).output))
        # 'It is raining.'
        print(repr((await agent.run("something else entirely", ctx)).output))
        # '{}'   <- the trap: an unmatched key is not an error

    asyncio.run(main())
    assert printed(capsys) == ["'It is raining.'", "'{}'"]


def test_fake_llm_callable(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        seen: list[str] = []

        def responder(*, system: str, user: str, model: str) -> str:
            seen.append(user)
            return f"echo: {user}"

        ctx = make_test_ctx(llm=FakeLLM(responder))
        print((await Agent("a", model="fake-model").run("ping", ctx)).output)
        # echo: ping
        print(seen)  # ['ping']

    asyncio.run(main())
    assert printed(capsys) == ["echo: ping", "['ping']"]


def test_fake_llm_script_drives_a_tool_loop(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        tool = FakeTool(name="lookup_cert", responder={"notAfter": "2026-08-01"})
        llm = FakeLLM.script(
            [
                Turn(tool_calls=(ToolCall("c1", "lookup_cert", {"host": "example.com"}),)),
                Turn(content="The certificate expired on 2026-08-01."),
            ]
        )
        ctx = make_test_ctx(llm=llm)
        agent = Agent("sre", model="fake-model", cognition=ReActCognition(tools=[tool]))

        result = await agent.run("Why did the deploy fail?", ctx)

        print(result.output)  # The certificate expired on 2026-08-01.
        print(tool.calls)  # [{'host': 'example.com'}]
        print(llm.calls)  # 2

    asyncio.run(main())
    assert printed(capsys) == [
        "The certificate expired on 2026-08-01.",
        "[{'host': 'example.com'}]",
        "2",
    ]


def test_failure_injection_with_retry_and_a_fake_clock(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        clock = FakeClock()
        llm = FakeLLM("recovered", fail_times=2, fail_exc=TimeoutError("upstream timeout"))
        ctx = make_test_ctx(llm=llm, chat_middleware=[retry(max_attempts=3, sleep=clock.sleep)])

        result = await Agent("a", model="fake-model").run("go", ctx)

        print(result.output)  # recovered
        print("provider calls:", llm.calls)  # 3
        print("backoffs waited:", len(clock.sleeps))  # 2
        print("wall clock advanced:", clock.now() > 0)  # True

    asyncio.run(main())
    assert printed(capsys) == [
        "recovered",
        "provider calls: 3",
        "backoffs waited: 2",
        "wall clock advanced: True",
    ]


def test_the_rest_of_the_doubles(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        search = FakeSearch({"cert": [SearchHit("https://ex/1", "Cert rotation", "rotate every 90d")]})
        print(len(await search.search("how do I rotate a cert", k=5)))  # 1
        print(await search.search("unrelated"), search.calls)  # [] 2

        fetch = FakeFetch(
            {
                "https://ex/1": FetchResponse(
                    "https://ex/1",
                    200,
                    {"content-type": "text/html"},
                    "<p>hi</p>",
                    "text/html",
                    1.7e9,
                )
            }
        )
        print((await fetch.fetch("https://ex/1")).body)  # <p>hi</p>
        try:
            await fetch.fetch("https://ex/2")
        except KeyError as exc:
            print("KeyError:", exc)  # no silent 404s in tests

        mem = FakeMemory(responses={"cert": [MemoryItem("rotate every 90d", "runbook")]})
        print(len(await mem.query("cert", k=2, ctx=FakeCtx())))  # 1
        print(mem.queries)  # [('cert', 2, None)]

    asyncio.run(main())
    lines = printed(capsys)
    assert lines[:3] == ["1", "[] 2", "<p>hi</p>"]
    # The document states no exact text for the KeyError line; it must name the missing URL.
    assert lines[3].startswith("KeyError: ") and "https://ex/2" in lines[3]
    assert lines[4:] == ["1", "[('cert', 2, None)]"]


def test_assert_on_spans(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        tracer = RecordingTracer()
        ctx = make_test_ctx(llm=FakeLLM("ok"), trace=tracer)
        await Agent("analyst", model="fake-model").run("go", ctx)
        print([(s.name, s.kind) for s in tracer.spans])
        # [('invoke_agent', 'client'), ('compose', 'compose')]

    asyncio.run(main())
    assert printed(capsys) == ["[('invoke_agent', 'client'), ('compose', 'compose')]"]


def test_assert_on_observations(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        sink = CollectingObserver()
        ctx = make_test_ctx(observer=sink)
        await ctx.emit("step", "planning", agent="analyst")
        await ctx.emit("result", "done", payload={"ok": True}, agent="analyst")
        await sink.close()
        print([o.kind for o in sink.items])  # ['step', 'result']

    asyncio.run(main())
    assert printed(capsys) == ["['step', 'result']"]


def test_trap_memoize_without_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    async def run_twice(ctx: RunContext, llm: FakeLLM) -> int:  # the document leaves it untyped
        agent = Agent("analyst", model="fake-model")
        await agent.run("same question", ctx)
        await agent.run("same question", ctx)
        return llm.calls

    async def main() -> None:
        # WRONG — no store. memoize() is a no-op.
        llm = FakeLLM("cached?")
        ctx = make_test_ctx(llm=llm, chat_middleware=[memoize()])
        print("no store:  ", await run_twice(ctx, llm), "provider calls")
        # no store:   2 provider calls

        # RIGHT — a store, so the cache actually exists.
        llm = FakeLLM("cached?")
        ctx = make_test_ctx(llm=llm, store=InMemoryStore(), chat_middleware=[memoize()])
        print("with store:", await run_twice(ctx, llm), "provider calls")
        # with store: 1 provider calls

    asyncio.run(main())
    assert printed(capsys) == ["no store:   2 provider calls", "with store: 1 provider calls"]


def test_trap_budget_without_meter(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        ctx = make_test_ctx(llm=FakeLLM("ok"), budget=Budget(max_cost_usd=Decimal("0.10")))
        await Agent("a", model="fake-model").run("go", ctx)
        print("unmetered:", ctx.budget.spent(), ctx.budget.calls)
        # unmetered: 0.000000 0

        ctx = make_test_ctx(
            llm=FakeLLM("ok"),
            budget=Budget(max_cost_usd=Decimal("0.10")),
            chat_middleware=[meter()],
        )
        await Agent("a", model="fake-model").run("go", ctx)
        print("metered:  ", ctx.budget.spent(), ctx.budget.calls)
        # metered:   0.000100 1

    asyncio.run(main())
    assert printed(capsys) == ["unmetered: 0.000000 0", "metered:   0.000100 1"]


def test_trap_a_script_that_runs_out_raises(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        llm = FakeLLM.script([Turn(content="one"), Turn(content="two")])
        ctx = make_test_ctx(llm=llm)
        agent = Agent("a", model="fake-model")
        try:
            for _ in range(3):
                print((await agent.run("go", ctx)).output)
        except ScriptExhausted as exc:
            print(exc)  # ... has 2 turn(s), but the agent asked for turn 3 ...

    asyncio.run(main())
    lines = printed(capsys)
    assert lines[:2] == ["one", "two"]
    assert len(lines) == 3
    assert "has 2 turn(s), but the agent asked for turn 3" in lines[2]


def test_trap_repeat_last_replays_the_final_turn() -> None:
    # The document's snippet: one tool-call turn, replayed forever; max_iterations ends the run.
    llm = FakeLLM.script(
        [Turn(tool_calls=(ToolCall("c1", "fetch", {}),))],
        repeat_last=True,
    )
    fetch = FakeTool("fetch", responder="page")
    agent = Agent("a", model="fake-model", cognition=ReActCognition(tools=[fetch], max_iterations=4))

    result = asyncio.run(agent.run("go", make_test_ctx(llm=llm)))

    assert result.stopped and result.reason == "max_iterations"
    assert llm.calls == 4 and len(fetch.calls) == 4


def test_trap_complete_does_not_read_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        llm = FakeLLM.script([Turn(content="scripted one")])
        chatted = await llm.chat(messages=[Message("user", "hi")], model="m")
        completed = await llm.complete(system="s", user="u", model="m")
        print(repr(chatted.content), repr(completed.content))

    asyncio.run(main())
    assert printed(capsys) == ["'scripted one' '{}'"]


# ---- the kernel document's examples built on core.testing ---------------------------------------


def test_kernel_smallest_thing_that_works(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        ctx = make_test_ctx(llm=FakeLLM("42"))
        request = ChatRequest(
            messages=[Message("user", "what is 6 * 7?")],
            model="fake-model",
        )
        result = await ctx.invoker.chat(request, ctx)
        print(result.content)  # 42
        print(result.usage.total_tokens)  # 15
        print(result.provider)  # fake

    asyncio.run(main())
    assert printed(capsys) == ["42", "15", "fake"]


def test_kernel_call_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    call = Call(
        kind="chat",  # "chat" | "tool"
        request=ChatRequest(messages=[Message("user", "hi")], model="fake-model"),
        ctx=make_test_ctx(),  # the RunContext
        meta={},  # per-call signals between middlewares
    )
    print(call.kind, type(call.request).__name__)  # chat ChatRequest
    assert printed(capsys) == ["chat ChatRequest"]
