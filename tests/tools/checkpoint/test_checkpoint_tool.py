"""What the ``checkpoint`` tool adds to the contract: retention, JSON-only states, the conflict's
details, where it stores by default, two processes on one run, and outages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from core.contracts.errors import ErrorClass, classify
from core.contracts.ports import Checkpoint, CheckpointStatus
from core.errors import ToolUnavailableError
from core.registry import ToolStatus
from core.state.stores import CheckpointVersionConflict
from tests.kit import booted, bound_tool, make_root, started_tool
from tests.tools.checkpoint.conftest import tool_on
from tests.tools.db.db_fixtures import Forwarder, through
from tests.tools.store.services import postgres_url, schema_created_later, set_up_together
from tools.checkpoint.checkpoint_tool import CheckpointTool
from tools.checkpoint.errors import CheckpointConflict, CheckpointEncodeError


def snapshot(run_id: str, version: int, state: Any = None) -> Checkpoint:
    return Checkpoint(
        run_id, version, {"v": version} if state is None else state, float(version), CheckpointStatus.RUNNING
    )


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def keeping_three(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    monkeypatch.setenv("CHECKPOINT_KEEP_VERSIONS", "3")
    async with tool_on(request.param, tmp_path, monkeypatch) as tool:
        yield tool


async def test_only_the_newest_versions_are_kept(keeping_three: Any) -> None:
    tool = keeping_three
    for version in range(1, 8):
        await tool.save(snapshot("r", version))
    assert await tool.list_versions("r") == [5, 6, 7]
    assert await tool.at_version("r", 4) is None
    assert (await tool.latest("r")) == snapshot("r", 7)
    with pytest.raises(CheckpointVersionConflict):  # pruning never lets the run go back
        await tool.save(snapshot("r", 6))


async def test_keep_zero_keeps_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_URL", "memory://")
    monkeypatch.setenv("CHECKPOINT_KEEP_VERSIONS", "0")
    async with started_tool(CheckpointTool, tmp_path) as tool:
        for version in range(1, 31):
            await tool.save(snapshot("r", version))
        assert len(await tool.list_versions("r")) == 30


async def test_the_default_keeps_twenty(checkpoint: Any) -> None:
    for version in range(1, 26):
        await checkpoint.save(snapshot("r", version))
    assert await checkpoint.list_versions("r") == list(range(6, 26))


@pytest.mark.parametrize(
    "state",
    [{"when": object()}, {"tags": {1, 2}}, {"x": float("nan")}, {"b": b"bytes"}],
    ids=["object", "set", "nan", "bytes"],
)
async def test_a_state_that_is_not_json_is_refused(checkpoint: Any, state: Any) -> None:
    with pytest.raises(CheckpointEncodeError, match="the state is not a JSON document"):
        await checkpoint.save(Checkpoint("r", 1, state, 0.0, CheckpointStatus.RUNNING))
    assert await checkpoint.list_versions("r") == []


async def test_the_conflict_says_how_far_the_run_got(checkpoint: Any) -> None:
    await checkpoint.save(snapshot("r", 1))
    await checkpoint.save(snapshot("r", 2))
    with pytest.raises(CheckpointConflict) as caught:
        await checkpoint.save(snapshot("r", 2))
    assert (caught.value.run_id, caught.value.version, caught.value.latest) == ("r", 2, 2)
    assert classify(caught.value) is ErrorClass.PERMANENT


async def test_by_default_it_uses_the_db_tools_sqlite_file(tmp_path: Path) -> None:
    async with started_tool(CheckpointTool, tmp_path) as tool:
        await tool.save(snapshot("r", 1))
    assert (tmp_path / "data" / "keel.db").exists()
    async with started_tool(CheckpointTool, tmp_path) as tool:  # and it is durable
        assert (await tool.latest("r")) == snapshot("r", 1)


async def test_without_checkpoint_url_it_follows_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///elsewhere/app.db")
    async with started_tool(CheckpointTool, tmp_path) as tool:
        await tool.save(snapshot("r", 1))
    assert (tmp_path / "elsewhere" / "app.db").exists()


async def test_it_shares_the_file_with_the_db_tool(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("db", "checkpoint"))
    async with booted(root) as kernel:
        dump = kernel.registry.get_system_dump()["tools"]
        assert dump["checkpoint"]["status"] == ToolStatus.OK
        assert dump["checkpoint"]["message"].endswith("data/keel.db; keeps the newest 20 versions")
        db, checkpoints = kernel.container.get("db"), kernel.container.get("checkpoint")
        await db.execute("CREATE TABLE notes (body TEXT)")

        async def write_notes() -> None:
            for n in range(20):
                await db.execute("INSERT INTO notes VALUES ($1)", [str(n)])

        async def write_checkpoints() -> None:
            for version in range(1, 21):
                await checkpoints.save(snapshot("r", version))

        await asyncio.gather(write_notes(), write_checkpoints())
        assert await db.scalar("SELECT count(*) FROM notes") == 20
        assert await db.scalar("SELECT count(*) FROM keel_checkpoints") == 20


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_two_processes_producing_one_run_cannot_fork_it(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with postgres_url() if backend == "postgresql" else nullcontext() as url:
        monkeypatch.setenv("CHECKPOINT_URL", url or f"sqlite:///{tmp_path}/shared.db")
        async with (
            started_tool(CheckpointTool, tmp_path / "a") as first,
            started_tool(CheckpointTool, tmp_path / "b") as second,
        ):
            await first.save(snapshot("r", 1))
            results = await asyncio.gather(
                first.save(snapshot("r", 2, {"by": "first"})),
                second.save(snapshot("r", 2, {"by": "second"})),
                return_exceptions=True,
            )
            assert sum(isinstance(r, CheckpointVersionConflict) for r in results) == 1
            winner = await second.latest("r")
            assert winner is not None and winner.state["by"] in ("first", "second")
            assert await first.list_versions("r") == [1, 2]


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("CHECKPOINT_URL", "mysql://x", "scheme 'mysql' is not supported"),
        ("CHECKPOINT_KEEP_VERSIONS", "-1", "CHECKPOINT_KEEP_VERSIONS must be a whole number"),
    ],
)
async def test_a_setting_that_cannot_be_used_makes_it_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, fragment: str
) -> None:
    monkeypatch.setenv(name, value)
    root = make_root(tmp_path, tools=("checkpoint",))
    async with booted(root) as kernel:
        state = kernel.registry.get_system_dump()["tools"]["checkpoint"]
        assert state["status"] == ToolStatus.DEAD and fragment in state["message"]
        with pytest.raises(ToolUnavailableError, match="misconfigured"):
            await kernel.container.get("checkpoint").latest("r")


async def test_an_outage_marks_it_dead_until_the_database_answers_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with postgres_url() as url:
        parts = urlsplit(url)
        relay = Forwarder(parts.hostname or "127.0.0.1", parts.port or 5432)
        await relay.start()
        monkeypatch.setenv("CHECKPOINT_URL", through(url, relay.port))
        monkeypatch.setenv("CHECKPOINT_CONNECT_TIMEOUT", "2")
        root = make_root(tmp_path, tools=("checkpoint",))
        try:
            async with booted(root) as kernel:
                tool = kernel.container.get("checkpoint")
                await tool.save(snapshot("r", 1))
                await relay.stop()
                with pytest.raises(ToolUnavailableError):
                    await tool.latest("r")
                assert kernel.registry.tool_status("checkpoint") is ToolStatus.DEAD
                assert await tool.health_check() is False
                await relay.start()
                assert (await tool.latest("r")) == snapshot("r", 1)
                assert kernel.registry.tool_status("checkpoint") is ToolStatus.OK
        finally:
            await relay.stop()


async def test_a_sqlite_file_that_cannot_be_created_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "blocker").write_text("a file where the folder should be")
    monkeypatch.setenv("CHECKPOINT_URL", "sqlite:///blocker/cp.db")
    tool = bound_tool(CheckpointTool, tmp_path)
    with pytest.raises(ToolUnavailableError):
        await tool.setup()


async def test_processes_booting_together_on_a_fresh_database_all_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_POOL_MAX", "1")
    for round_ in range(3):  # the catalog collision this guards against is a race: give it chances
        async with postgres_url() as url:
            monkeypatch.setenv("CHECKPOINT_URL", url)
            tools = [bound_tool(CheckpointTool, tmp_path / f"{round_}-{n}") for n in range(8)]
            assert await set_up_together(tools) == []


async def test_a_database_that_refuses_the_table_at_boot_is_dead_and_recovers_once_it_accepts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with schema_created_later() as (url, create_schema):
        monkeypatch.setenv("CHECKPOINT_URL", url)
        async with booted(make_root(tmp_path, tools=("checkpoint",))) as kernel:
            state = kernel.registry.get_system_dump()["tools"]["checkpoint"]
            assert state["status"] == ToolStatus.DEAD
            assert "the checkpoints' PostgreSQL cannot create its table" in state["message"]
            await create_schema()
            tool = kernel.container.get("checkpoint")
            await tool.save(snapshot("r", 1))
            assert (await tool.latest("r")) == snapshot("r", 1)
            assert kernel.registry.tool_status("checkpoint") is ToolStatus.OK
