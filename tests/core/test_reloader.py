"""Plugin files loaded, reloaded and unloaded on a running kernel, through ``kernel.plugin_host``.

A ``board`` tool stands in for the tools plugins register things with: it implements the owner
protocol (``release_owner``, ``promote_owner``, staged registrations held back until promotion)
and keeps a journal of every hook the kernel calls, so each test can check what happened and in
which order. A ``sinks`` tool implements only ``release_owner``, like a tool written before live
reload existed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from core import Kernel
from core.loader import module_name
from core.reloader import ReloadAction, base_owner, is_staging, plugin_host, staging_owner
from tests.kit import booted, make_root, until, write

BOARD_TOOL = """
    import asyncio
    from core import BaseTool
    from core.context import current_plugin_var
    from core.reloader import is_staging


    class Board(BaseTool):
        '''Pins per owner; a staged version's pins wait for promote_owner.'''

        name = "board"

        def __init__(self):
            self.live = {}
            self.pending = {}
            self.journal = []
            self.gaps = []
            self.drained = asyncio.Event()
            self.drained.set()

        def pin(self, key, value):
            owner = current_plugin_var.get()
            if is_staging(owner):
                self.pending.setdefault(owner, {})[key] = value
            else:
                self.live = {**self.live, key: (owner, value)}

        def read(self, key):
            return self.live.get(key, (None, None))[1]

        def note(self, text):
            self.journal.append(text)

        def release_owner(self, owner):
            self.pending.pop(owner, None)
            self.live = {k: v for k, v in self.live.items() if v[0] != owner}
            self.gaps.append("pin" not in self.live)

        def promote_owner(self, staged, owner):
            incoming = self.pending.pop(staged, {})
            live = {k: v for k, v in self.live.items() if v[0] != owner}
            live.update({k: (owner, v) for k, v in incoming.items()})
            self.live = live
            self.journal.append(f"promote {owner}")
            self.gaps.append("pin" not in self.live)

        async def drain_owner(self, owner):
            self.journal.append(f"drain {owner}")
            await self.drained.wait()

        async def on_plugins_changed(self, container):
            self.journal.append("changed")
"""

SINKS_TOOL = """
    from core import BaseTool
    from core.context import current_plugin_var


    class Sinks(BaseTool):
        name = "sinks"

        def __init__(self):
            self.entries = []

        def add(self, value):
            self.entries = [*self.entries, (current_plugin_var.get(), value)]

        def release_owner(self, owner):
            self.entries = [e for e in self.entries if e[0] != owner]
"""

NOTES = """
    from core import BasePlugin


    class Notes(BasePlugin):
        def __init__(self, board):
            self.board = board

        async def on_boot(self):
            self.board.note(f"boot {VERSION} sees {self.board.read('pin')}")
            self.board.pin("pin", VERSION)

        async def on_shutdown(self):
            self.board.note(f"shutdown {VERSION}")


    VERSION = {version}
"""

PLUGIN_FILE = "domains/demo/plugins/notes.py"


def notes(version: int | str) -> str:
    return NOTES.replace("{version}", str(version))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write(root, "tools/board/board_tool.py", BOARD_TOOL)
    write(root, "tools/sinks/sinks_tool.py", SINKS_TOOL)
    write(root, PLUGIN_FILE, notes(1))
    return root


def board(kernel: Kernel) -> Any:
    return kernel.container.get_raw_tools()["board"]


def plugin_state(kernel: Kernel, plugin_id: str = "demo.Notes") -> dict[str, Any]:
    return kernel.registry.get_system_dump()["plugins"][plugin_id]  # type: ignore[no-any-return]


async def apply(kernel: Kernel, *paths: Path) -> list[Any]:
    return await kernel.plugin_host.apply(paths)


# -- staging owners ------------------------------------------------------------------------------


def test_staging_owner_names_the_plugin_it_stands_for() -> None:
    owner = staging_owner("shop.Orders", 7)
    assert is_staging(owner) and not is_staging("shop.Orders") and not is_staging(None)
    assert base_owner(owner) == "shop.Orders" and base_owner("shop.Orders") == "shop.Orders"
    assert base_owner(None) is None


async def test_the_container_leads_to_its_kernels_plugin_host(root: Path) -> None:
    async with booted(root) as kernel:
        assert plugin_host(kernel.container) is kernel.plugin_host
        assert kernel.plugin_host.is_plugin_file(root / PLUGIN_FILE)
        assert not kernel.plugin_host.is_plugin_file(root / "domains/demo/plugins/_private.py")
        assert not kernel.plugin_host.is_plugin_file(root / "domains/demo/models/user.py")
        assert not kernel.plugin_host.is_plugin_file(root / "domains/demo/plugins/notes.txt")


# -- a new file ----------------------------------------------------------------------------------


async def test_a_new_file_is_loaded_as_at_boot(root: Path) -> None:
    async with booted(root) as kernel:
        path = write(root, "domains/demo/plugins/extra.py", notes(5).replace("Notes", "Extra"))
        [outcome] = await apply(kernel, path)
        assert (outcome.action, outcome.plugins, outcome.errors) == (ReloadAction.LOADED, ("demo.Extra",), {})
        assert plugin_state(kernel, "demo.Extra")["status"] == "READY"
        assert plugin_state(kernel, "demo.Extra")["file"] == "domains/demo/plugins/extra.py"
        assert board(kernel).read("pin") == 5
        assert board(kernel).journal[-1] == "changed"


async def test_a_new_file_that_fails_is_dead_as_at_boot(root: Path) -> None:
    async with booted(root) as kernel:
        path = write(
            root,
            "domains/demo/plugins/broken.py",
            """
            from core import BasePlugin

            class Broken(BasePlugin):
                def __init__(self, board, mailer):
                    pass
            """,
        )
        [outcome] = await apply(kernel, path)
        assert outcome.action is ReloadAction.FAILED
        assert outcome.errors == {"demo.Broken": "missing required tools: mailer"}
        assert plugin_state(kernel, "demo.Broken")["status"] == "DEAD"


# -- a changed file ------------------------------------------------------------------------------


async def test_a_changed_file_boots_the_new_version_before_the_old_one_stops(root: Path) -> None:
    async with booted(root) as kernel:
        old = kernel.plugins["demo.Notes"]
        [outcome] = await apply(kernel, write(root, PLUGIN_FILE, notes(2)))
        assert (outcome.action, outcome.plugins, outcome.errors) == (
            ReloadAction.RELOADED,
            ("demo.Notes",),
            {},
        )
        journal = board(kernel).journal
        # The new version booted while the old one's pin was still the live one.
        assert journal == [
            "boot 1 sees None",
            "boot 2 sees 1",
            "promote demo.Notes",
            "drain demo.Notes",
            "shutdown 1",
            "changed",
        ]
        assert board(kernel).live == {"pin": ("demo.Notes", 2)}
        assert board(kernel).gaps == [False]
        assert kernel.plugins["demo.Notes"] is not old
        assert plugin_state(kernel) | {"dependencies": None} == {
            "status": "READY",
            "error": None,
            "domain": "demo",
            "class": "Notes",
            "dependencies": None,
            "file": PLUGIN_FILE,
            "reload_error": None,
            "degraded": None,
        }


async def test_a_change_within_the_same_second_and_size_is_not_served_from_stale_bytecode(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a deployment would run
    path = root / PLUGIN_FILE
    async with booted(root) as kernel:
        assert list((path.parent / "__pycache__").glob("notes.*.pyc"))
        before = path.stat()
        write(root, PLUGIN_FILE, notes(7))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_size == before.st_size
        await apply(kernel, path)
        assert board(kernel).read("pin") == 7


BROKEN_VERSIONS = {
    "syntax error": ("def broken(:\n", "SyntaxError"),
    "missing tool": (
        notes(2).replace("def __init__(self, board):", "def __init__(self, board, mailer):"),
        "missing required tools: mailer",
    ),
    "__init__ raises": (
        notes(2).replace("self.board = board", "raise RuntimeError('no config')"),
        "__init__ raised RuntimeError: no config",
    ),
    "on_boot raises": (
        notes(2).replace(
            'self.board.pin("pin", VERSION)', "self.board.pin('pin', 2); raise ValueError('bad')"
        ),
        "on_boot() raised ValueError: bad",
    ),
    "on_boot hangs": (
        notes(2).replace(
            'self.board.pin("pin", VERSION)',
            "self.board.pin('pin', 2); await __import__('asyncio').Event().wait()",
        ),
        "did not finish within 0.2s (PLUGIN_BOOT_TIMEOUT)",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_VERSIONS))
async def test_a_broken_new_version_leaves_the_old_one_serving(
    root: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGIN_BOOT_TIMEOUT", "0.2")
    source, expected = BROKEN_VERSIONS[case]
    async with booted(root) as kernel:
        old = kernel.plugins["demo.Notes"]
        [outcome] = await apply(kernel, write(root, PLUGIN_FILE, source))
        assert outcome.action is ReloadAction.FAILED
        assert any(expected in error for error in outcome.errors.values())
        assert kernel.plugins["demo.Notes"] is old
        assert board(kernel).live == {"pin": ("demo.Notes", 1)}
        assert board(kernel).pending == {}
        assert "shutdown 1" not in board(kernel).journal
        state = plugin_state(kernel)
        assert state["status"] == "READY" and state["error"] is None
        assert expected in state["reload_error"]
        load_errors = kernel.registry.get_system_dump()["load_errors"]
        assert (PLUGIN_FILE in load_errors) == (case == "syntax error")

        [outcome] = await apply(kernel, write(root, PLUGIN_FILE, notes(3)))
        assert outcome.ok
        assert board(kernel).read("pin") == 3
        assert plugin_state(kernel)["reload_error"] is None
        assert kernel.registry.get_system_dump()["load_errors"] == {}


async def test_a_class_removed_from_its_file_is_unloaded(root: Path) -> None:
    two_classes = notes(1) + notes(1).split("\n\n\n", 1)[1].replace("class Notes", "class Extra")
    write(root, PLUGIN_FILE, two_classes)
    async with booted(root) as kernel:
        assert {"demo.Notes", "demo.Extra"} <= set(kernel.plugins)
        [outcome] = await apply(kernel, write(root, PLUGIN_FILE, notes(2)))
        assert outcome.plugins == ("demo.Notes",)
        assert "demo.Extra" not in kernel.plugins
        assert "demo.Extra" not in kernel.registry.get_system_dump()["plugins"]
        assert board(kernel).journal.count("shutdown 1") == 2


async def test_load_plugin_file_replaces_a_running_plugin_in_stages(root: Path) -> None:
    async with booted(root) as kernel:
        write(root, PLUGIN_FILE, notes(2))
        built = await kernel.load_plugin_file(root / PLUGIN_FILE, fresh=True)
        assert [p.plugin_id for p in built] == ["demo.Notes"]
        assert kernel.plugins["demo.Notes"] is built[0]
        assert board(kernel).journal[1:4] == ["boot 2 sees 1", "promote demo.Notes", "drain demo.Notes"]


# -- a deleted or renamed file -------------------------------------------------------------------


async def test_a_deleted_file_is_unloaded_and_forgotten(root: Path) -> None:
    path = root / PLUGIN_FILE
    async with booted(root) as kernel:
        name = module_name(kernel.root, path)
        assert name in sys.modules
        path.unlink()
        [outcome] = await apply(kernel, path)
        assert (outcome.action, outcome.plugins) == (ReloadAction.UNLOADED, ("demo.Notes",))
        assert board(kernel).live == {}
        assert board(kernel).journal[-3:] == ["drain demo.Notes", "shutdown 1", "changed"]
        assert "demo.Notes" not in kernel.plugins
        assert kernel.registry.get_system_dump()["plugins"] == {}
        assert name not in sys.modules
        assert await apply(kernel, path) == []  # nothing left to do for a file it no longer knows


async def test_a_renamed_file_moves_its_plugin_without_a_gap(root: Path) -> None:
    old_path, new_path = root / PLUGIN_FILE, root / "domains/demo/plugins/renamed.py"
    async with booted(root) as kernel:
        write(root, "domains/demo/plugins/renamed.py", notes(2))
        old_path.unlink()
        outcomes = await apply(kernel, old_path, new_path)
        assert [(o.file, o.action) for o in outcomes] == [
            ("domains/demo/plugins/renamed.py", ReloadAction.RELOADED),
        ]
        assert board(kernel).gaps == [False]
        assert kernel.plugins["demo.Notes"].file == new_path
        assert plugin_state(kernel)["file"] == "domains/demo/plugins/renamed.py"
        assert board(kernel).read("pin") == 2


async def test_a_folder_moved_away_unloads_the_plugin_files_it_held(root: Path) -> None:
    async with booted(root) as kernel:
        (root / "domains/demo").rename(root / "demo-elsewhere")
        [outcome] = await apply(kernel, root / "domains/demo")
        assert (outcome.action, outcome.plugins) == (ReloadAction.UNLOADED, ("demo.Notes",))
        assert kernel.plugins == {} and board(kernel).live == {}


async def test_a_failed_import_of_a_file_that_never_loaded_is_forgotten_when_deleted(root: Path) -> None:
    async with booted(root) as kernel:
        path = write(root, "domains/demo/plugins/typo.py", "def broken(:\n")
        [outcome] = await apply(kernel, path)
        assert outcome.action is ReloadAction.FAILED
        assert "domains/demo/plugins/typo.py" in kernel.registry.get_system_dump()["load_errors"]
        path.unlink()
        [outcome] = await apply(kernel, path)
        assert outcome.action is ReloadAction.UNLOADED
        assert kernel.registry.get_system_dump()["load_errors"] == {}


# -- what a plugin registered --------------------------------------------------------------------

SINK_PLUGIN = """
    from core import BasePlugin


    class Sinky(BasePlugin):
        def __init__(self, sinks):
            self.sinks = sinks

        def on_boot(self):
            self.sinks.add({version})
"""


async def test_a_tool_without_promote_owner_gets_the_old_owner_released(root: Path) -> None:
    path = write(root, "domains/demo/plugins/sinky.py", SINK_PLUGIN.replace("{version}", "1"))
    async with booted(root) as kernel:
        sinks = kernel.container.get_raw_tools()["sinks"]
        assert sinks.entries == [("demo.Sinky", 1)]  # type: ignore[attr-defined]
        await apply(
            kernel, write(root, "domains/demo/plugins/sinky.py", SINK_PLUGIN.replace("{version}", "2"))
        )
        [(owner, value)] = sinks.entries  # type: ignore[attr-defined]
        assert value == 2 and base_owner(owner) == "demo.Sinky"
        await apply(
            kernel, write(root, "domains/demo/plugins/sinky.py", SINK_PLUGIN.replace("{version}", "3"))
        )
        assert [value for _, value in sinks.entries] == [3]  # type: ignore[attr-defined]
        path.unlink()
        await apply(kernel, path)
        assert sinks.entries == []  # type: ignore[attr-defined]


TASK_PLUGIN = """
    import asyncio
    from core import BasePlugin


    class Ticker(BasePlugin):
        def __init__(self, board, tasks):
            self.board = board
            self.tasks = tasks

        {kind}def on_boot(self):
            self.task = self.tasks.start(self.tick())
            {fail}

        async def tick(self):
            from core.context import current_identity_var, current_plugin_var
            self.board.note(f"tick {VERSION} as {current_plugin_var.get()} {current_identity_var.get()}")
            try:
                await asyncio.sleep(3600)
            finally:
                self.board.note(f"tick {VERSION} cancelled")


    VERSION = {version}
"""


def ticker(version: int, *, kind: str = "async ", fail: str = "") -> str:
    return (
        TASK_PLUGIN.replace("{version}", str(version))
        .replace("{kind}", kind)
        .replace("{fail}", fail or "pass")
    )


@pytest.mark.parametrize("kind", ["async ", ""])
async def test_background_tasks_stop_with_their_version(root: Path, kind: str) -> None:
    path = write(root, "domains/demo/plugins/ticker.py", ticker(1, kind=kind))
    async with booted(root) as kernel:
        journal = board(kernel).journal
        await until(lambda: "tick 1 as demo.Ticker demo.Ticker.tick" in journal, "version 1 ticks")
        first = kernel.plugins["demo.Ticker"].tasks
        assert first is not None and first.running == 1

        await apply(kernel, write(root, "domains/demo/plugins/ticker.py", ticker(2, kind=kind)))
        assert "tick 1 cancelled" in journal and first.running == 0
        # Started while version 2 was staged, so it ran as the staging owner until promotion.
        await until(
            lambda: any(n.startswith("tick 2 as demo.Ticker#staging-") for n in journal), "version 2 ticks"
        )
        assert kernel.plugins["demo.Ticker"].tasks.owner == "demo.Ticker"  # type: ignore[union-attr]

        await apply(
            kernel,
            write(
                root,
                "domains/demo/plugins/ticker.py",
                ticker(3, fail="await asyncio.sleep(0); raise ValueError"),
            ),
        )
        await until(lambda: "tick 3 cancelled" in journal, "the failed version's task stops")
        assert "tick 2 cancelled" not in journal  # the failed version's task stopped, the old one runs
        second = kernel.plugins["demo.Ticker"].tasks
        assert second is not None and second.running == 1

        path.unlink()
        await apply(kernel, path)
        assert "tick 2 cancelled" in journal and second.running == 0
        with pytest.raises(RuntimeError, match="unloaded"):
            second.start(asyncio.sleep(0))


async def test_a_failing_background_task_is_logged_with_its_plugin(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(
        root,
        "domains/demo/plugins/failing.py",
        """
        from core import BasePlugin

        class Failing(BasePlugin):
            def __init__(self, tasks):
                self.tasks = tasks

            async def on_boot(self):
                self.task = self.tasks.start(self.explode())

            async def explode(self):
                raise RuntimeError("boom")
        """,
    )
    async with booted(root) as kernel:
        task = kernel.plugins["demo.Failing"].instance.task  # type: ignore[attr-defined]
        await asyncio.wait([task])
        await until(lambda: kernel.plugins["demo.Failing"].tasks.running == 0, "the task is gone")  # type: ignore[union-attr]
        assert any(
            "demo.Failing: background task demo.Failing.explode failed" in r.getMessage()
            for r in caplog.records
        )


async def test_a_tool_named_like_a_kernel_parameter_is_a_load_error(root: Path) -> None:
    write(root, "tools/tasks/tasks_tool.py", SINKS_TOOL.replace('name = "sinks"', 'name = "tasks"'))
    async with booted(root) as kernel:
        assert (
            "may not be named 'tasks'"
            in kernel.registry.get_system_dump()["load_errors"]["tools/tasks/tasks_tool.py"]
        )


# -- draining, batches, shutdown -----------------------------------------------------------------


async def test_the_old_version_shuts_down_only_after_its_work_drained(root: Path) -> None:
    async with booted(root) as kernel:
        tool = board(kernel)
        tool.drained.clear()
        reload = asyncio.create_task(apply(kernel, write(root, PLUGIN_FILE, notes(2))))
        await until(lambda: "drain demo.Notes" in tool.journal, "the old version drains")
        assert tool.read("pin") == 2  # already swapped
        assert "shutdown 1" not in tool.journal
        tool.drained.set()
        await reload
        assert tool.journal[-2:] == ["shutdown 1", "changed"]


async def test_draining_is_bounded(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLUGIN_DRAIN_TIMEOUT", "0.05")
    async with booted(root) as kernel:
        board(kernel).drained.clear()
        await apply(kernel, write(root, PLUGIN_FILE, notes(2)))
        assert board(kernel).journal[-2:] == ["shutdown 1", "changed"]


async def test_one_batch_notifies_the_tools_once(root: Path) -> None:
    async with booted(root) as kernel:
        paths = [
            write(root, f"domains/demo/plugins/extra{i}.py", notes(i).replace("Notes", f"Extra{i}"))
            for i in range(3)
        ]
        outcomes = await apply(kernel, *paths, root / "README.md", root / "domains/demo/plugins/_skip.py")
        assert [o.plugins for o in outcomes] == [("demo.Extra0",), ("demo.Extra1",), ("demo.Extra2",)]
        assert board(kernel).journal.count("changed") == 1


async def test_changes_after_shutdown_are_ignored(root: Path) -> None:
    kernel = Kernel(root)
    await kernel.boot()
    await kernel.shutdown()
    assert await apply(kernel, write(root, PLUGIN_FILE, notes(2))) == []


# -- 200 reloads leave nothing behind ------------------------------------------------------------

LEAKY = """
    import asyncio
    from core import BasePlugin


    class Everything(BasePlugin):
        '''Registers one of everything a plugin can register, and a background task.'''

        def __init__(self, http, event_bus, logger, registry, tasks):
            self.http, self.event_bus, self.logger, self.registry = http, event_bus, logger, registry
            self.tasks = tasks
            self.payload = bytearray(64 * 1024)  # makes a leaked instance easy to see

        async def on_boot(self):
            self.http.add_endpoint("/everything", "GET", self.answer)
            await self.event_bus.subscribe("everything.ping", self.on_ping)
            self.logger.add_sink(self.sink)
            self.registry.add_metrics_sink(self.metric)
            self.tasks.start(self.idle())

        async def answer(self, data, context):
            return {"version": VERSION}

        async def on_ping(self, event):
            return VERSION

        def sink(self, level, message, timestamp, identity):
            pass

        def metric(self, record):
            pass

        async def idle(self):
            await asyncio.sleep(3600)  # the loop's timer keeps this task alive until it is cancelled


    VERSION = {version}
"""


WARM_UP = 150
"""Reloads before measuring: the registry's ring buffer of tool calls, the event trace and the
bounded caches of FastAPI and ``typing`` fill up over the first ones (growth that stops)."""


def leaky(version: int) -> str:
    return LEAKY.replace("{version}", str(version))


def footprint(kernel: Kernel) -> dict[str, int]:
    tools = kernel.container.get_raw_tools()
    http, bus, logger = tools["http"], tools["event_bus"], tools["logger"]
    return {
        "routes": len(http.app.router.routes),  # type: ignore[attr-defined]
        "endpoints": len(http.get_endpoints()),  # type: ignore[attr-defined]
        "subscriptions": len(bus.subscriptions()),  # type: ignore[attr-defined]
        "log sinks": len(logger._sinks),  # type: ignore[attr-defined]
        "metrics sinks": len(kernel.registry.metrics_sinks),
        "tasks": len(asyncio.all_tasks()),
        "modules": len(sys.modules),
        "plugins": len(kernel.registry.get_system_dump()["plugins"]),
    }


async def test_two_hundred_reloads_leave_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import tracemalloc

    import httpx

    monkeypatch.setenv("LOG_LEVEL", "WARNING")  # one log line per reload is not what is measured
    monkeypatch.setenv("EVENT_TRACE_BUFFER", "10")  # a ring buffer that fills within the warm-up
    root = make_root(tmp_path, tools=("http", "event_bus", "logger", "system"))
    path = write(root, "domains/leak/plugins/everything.py", leaky(0))
    async with booted(root) as kernel:
        host = kernel.plugin_host
        bus = kernel.container.get("event_bus")
        transport = httpx.ASGITransport(app=kernel.container.get_raw_tools()["http"].asgi)  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=transport, base_url="http://keel.test") as client:

            async def cycle(version: int) -> None:
                if version % 10 == 0:  # every tenth cycle the file is deleted and dropped in again
                    path.unlink()
                    [gone] = await host.apply([path])
                    assert gone.action is ReloadAction.UNLOADED
                    assert (await client.get("/everything")).status_code == 404
                write(root, "domains/leak/plugins/everything.py", leaky(version))
                [outcome] = await host.apply([path])
                assert outcome.ok, outcome.errors
                assert (await client.get("/everything")).json() == {"version": version}
                assert await bus.request("everything.ping") == version

            for version in range(1, WARM_UP + 1):  # bounded caches and ring buffers fill up first
                await cycle(version)
            gc.collect()
            before = footprint(kernel)
            tracemalloc.start()
            try:
                gc.collect()
                baseline = tracemalloc.get_traced_memory()[0]
                for version in range(WARM_UP + 1, WARM_UP + 201):
                    await cycle(version)
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - baseline
            finally:
                tracemalloc.stop()
            assert footprint(kernel) == before
            assert before["subscriptions"] == 1 and before["log sinks"] == 2 and before["metrics sinks"] == 1
            # What remains is the running version (64 KiB of it is its payload) and bounded caches
            # still filling; one leaked instance per reload would be 200 x 64 KiB = 12.5 MiB.
            assert grown < 1024 * 1024, f"{grown} bytes more after 200 reloads"


PINNING_TASK_PLUGIN = """
    import asyncio
    from core import BasePlugin


    class Pinner(BasePlugin):
        def __init__(self, board, tasks):
            self.board = board
            self.tasks = tasks
            self.go = asyncio.Event()

        async def on_boot(self):
            self.tasks.start(self.pin_later())

        async def pin_later(self):
            await self.go.wait()
            self.board.pin("pin", {version})
"""


async def test_what_a_task_registers_after_its_version_is_promoted_belongs_to_the_plugin(root: Path) -> None:
    path = write(root, "domains/demo/plugins/pinner.py", PINNING_TASK_PLUGIN.replace("{version}", "1"))
    async with booted(root) as kernel:
        kernel.plugins["demo.Pinner"].instance.go.set()  # type: ignore[attr-defined]
        await until(lambda: board(kernel).read("pin") == 1, "version 1 pinned")
        await apply(
            kernel,
            write(root, path.relative_to(root).as_posix(), PINNING_TASK_PLUGIN.replace("{version}", "2")),
        )
        kernel.plugins["demo.Pinner"].instance.go.set()  # type: ignore[attr-defined]
        await until(lambda: board(kernel).read("pin") == 2, "version 2 pinned")
        assert board(kernel).live["pin"] == ("demo.Pinner", 2)
        await apply(
            kernel,
            write(root, path.relative_to(root).as_posix(), PINNING_TASK_PLUGIN.replace("{version}", "3")),
        )
        assert board(kernel).read("pin") is None  # version 2's pin went with version 2
