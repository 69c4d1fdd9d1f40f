"""Every double satisfies its port and records what the testing document says it records."""

from __future__ import annotations

from typing import Any

import pytest

from core.agents import Compactor, Grounder
from core.contracts.ports import (
    ClockPort,
    FetchPort,
    FetchResponse,
    SearchHit,
    SearchPort,
    ToolPort,
)
from core.contracts.protocols import Ctx
from core.contracts.types import Message, ToolSchema
from core.state.memory import MemoryItem, MemorySource
from core.testing import (
    FakeClock,
    FakeCompactor,
    FakeCtx,
    FakeFetch,
    FakeGrounder,
    FakeMemory,
    FakeSearch,
    FakeTool,
)


def test_each_double_satisfies_its_port() -> None:
    assert isinstance(FakeTool("t"), ToolPort)
    assert isinstance(FakeClock(), ClockPort)
    assert isinstance(FakeSearch(), SearchPort)
    assert isinstance(FakeFetch(), FetchPort)
    assert isinstance(FakeMemory(), MemorySource)
    assert isinstance(FakeGrounder(), Grounder)
    assert isinstance(FakeCompactor(), Compactor)
    assert isinstance(FakeCtx(), Ctx)


# ---- FakeTool --------------------------------------------------------------------------------------


async def test_fake_tool_records_a_copy_of_each_call() -> None:
    tool = FakeTool("lookup", responder={"ok": True})
    args: dict[str, Any] = {"host": "example.com", "ports": [443]}
    result = await tool.run(args, FakeCtx())
    args["ports"].append(80)
    result["ok"] = False  # the caller edits what it got back
    assert tool.calls == [{"host": "example.com", "ports": [443]}]
    assert await tool.run({}, FakeCtx()) == {"ok": True}
    assert tool.schema == ToolSchema("lookup", "fake tool lookup", {"type": "object"})
    assert tool.name == "lookup" and not tool.side_effecting and repr(tool) == "FakeTool('lookup', calls=2)"


async def test_fake_tool_responders() -> None:
    ctx = FakeCtx()
    assert await FakeTool("echo", responder=lambda a: a["x"] * 2).run({"x": 2}, ctx) == 4

    async def slow(args: dict[str, object]) -> str:
        return "awaited"

    assert await FakeTool("async", responder=slow).run({}, ctx) == "awaited"
    assert await FakeTool("none").run({}, ctx) is None
    failing = FakeTool("boom", responder=PermissionError("denied"))
    with pytest.raises(PermissionError, match="denied"):
        await failing.run({"a": 1}, ctx)
    assert failing.calls == [{"a": 1}]
    custom = FakeTool("s", description="search the web", parameters={"type": "object", "required": ["q"]})
    assert custom.schema.description == "search the web" and custom.schema.parameters["required"] == ["q"]


# ---- FakeClock -------------------------------------------------------------------------------------


async def test_fake_clock_sleeps_in_virtual_time() -> None:
    clock = FakeClock(start=10.0)
    await clock.sleep(1.5)
    await clock.sleep(0.5)
    clock.advance(100)
    assert clock.sleeps == [1.5, 0.5] and clock.now() == 112.0


# ---- FakeSearch / FakeFetch ------------------------------------------------------------------------


async def test_fake_search_matches_substrings_and_honours_k() -> None:
    hits = [SearchHit(f"https://ex/{i}", f"t{i}", "s") for i in range(4)]
    search = FakeSearch({"cert": hits, "certificate": hits[:1]})
    assert len(await search.search("cert rotation", k=2)) == 2
    assert await search.search("a certificate") == hits  # first key that matches wins
    assert await search.search("nothing") == []
    assert search.calls == 3 and search.queries == ["cert rotation", "a certificate", "nothing"]


async def test_fake_fetch_raises_key_error_for_an_unknown_url() -> None:
    page = FetchResponse("https://ex/1", 200, {}, "<p>hi</p>", "text/html", 0.0)
    fetch = FakeFetch({"https://ex/1": page})
    assert await fetch.fetch("https://ex/1") is page
    with pytest.raises(KeyError, match="https://ex/2"):
        await fetch.fetch("https://ex/2", timeout_s=1)
    assert fetch.calls == 2 and fetch.urls == ["https://ex/1", "https://ex/2"]


# ---- FakeMemory ------------------------------------------------------------------------------------


async def test_fake_memory_response_mode() -> None:
    items = [MemoryItem(f"fact {i}", "runbook") for i in range(3)]
    mem = FakeMemory(responses={"cert": items})
    assert await mem.query("cert expiry", k=2) == items[:2]
    assert await mem.query("unrelated", k=5, where={"tier": "recorded"}) == []
    assert mem.queries == [("cert expiry", 2, None), ("unrelated", 5, {"tier": "recorded"})]
    assert mem.name == "fake_memory"


async def test_fake_memory_fixture_mode_ignores_the_query() -> None:
    items = [MemoryItem(f"fact {i}", "journal") for i in range(3)]
    mem = FakeMemory(items=items, name="journal")
    assert await mem.query("anything at all", k=2) == items[:2]
    await mem.write([MemoryItem("new", "journal")], ctx=FakeCtx())
    await mem.write([MemoryItem("newer", "journal")])
    assert [w.content for w in mem.writes] == ["new", "newer"] and mem.name == "journal"
    with pytest.raises(ValueError, match="not both"):
        FakeMemory(responses={}, items=[])


# ---- FakeGrounder / FakeCompactor ------------------------------------------------------------------


async def test_fake_grounder_records_ctx_and_task() -> None:
    ctx = FakeCtx()
    fixed = FakeGrounder("grounding text")
    assert await fixed(ctx, "task one") == "grounding text"
    derived = FakeGrounder(lambda task: f"about {task}")
    assert await derived(ctx, "certs") == "about certs"
    assert fixed.calls == [(ctx, "task one")] and derived.calls == [(ctx, "certs")]


async def test_fake_compactor_counts_calls_and_can_trim() -> None:
    messages = [Message("user", str(i)) for i in range(5)]
    keep_all = FakeCompactor()
    assert await keep_all.compact(messages, FakeCtx()) == messages and keep_all.called == 1
    trim = FakeCompactor(keep_last=2)
    assert [m.content for m in await trim.compact(messages, FakeCtx())] == ["3", "4"]
    with pytest.raises(ValueError):
        FakeCompactor(keep_last=0)


# ---- FakeCtx ---------------------------------------------------------------------------------------


async def test_fake_ctx_records_spans_and_absorbs_the_rest() -> None:
    ctx = FakeCtx()
    with ctx.trace.span("retrieve", "internal", {"k": 2}):
        pass
    await ctx.emit("step", "ignored")
    assert [(s.name, s.kind, s.attrs) for s in ctx.spans] == [("retrieve", "internal", {"k": 2})]
