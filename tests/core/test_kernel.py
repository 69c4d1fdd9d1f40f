"""Boot, injection and shutdown on temporary project roots, including the fault battery.

Each fault is dropped into an otherwise healthy root; the test checks that the healthy parts still
boot and work, and that the system dump says why the broken part is not running.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import Kernel, PluginStatus, ToolStatus
from tests.kit import booted, until, write

GREETER_TOOL = """
    from core import BaseTool

    class Greeter(BaseTool):
        name = "greeter"

        def greet(self, who: str) -> str:
            return f"hello {who}"
"""

CALLER_PLUGIN = """
    from core import BasePlugin

    class Caller(BasePlugin):
        def __init__(self, greeter):
            self.greeter = greeter
            self.greeting = None

        async def on_boot(self):
            self.greeting = self.greeter.greet("boot")
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    write(root, "domains/good/plugins/caller.py", CALLER_PLUGIN)
    return root


def assert_healthy_part_works(kernel: Kernel) -> None:
    dump = kernel.registry.get_system_dump()
    assert dump["tools"]["greeter"]["status"] == "OK"
    assert dump["plugins"]["good.Caller"]["status"] == "READY"
    assert kernel.plugins["good.Caller"].instance.greeting == "hello boot"  # type: ignore[attr-defined]


async def test_boot_injects_by_name_and_proxies(root: Path) -> None:
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        dump = kernel.registry.get_system_dump()
        assert dump["plugins"]["good.Caller"] == {
            "status": "READY",
            "error": None,
            "domain": "good",
            "class": "Caller",
            "dependencies": ["greeter"],
            "file": "domains/good/plugins/caller.py",
            "reload_error": None,
            "degraded": None,
        }
        assert [(r["tool"], r["method"]) for r in kernel.registry.get_metrics()] == [("greeter", "greet")]


async def test_root_with_tools_but_no_domains_boots(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    async with booted(root) as kernel:
        assert kernel.registry.get_system_dump()["plugins"] == {}
        assert kernel.container.get("greeter").greet("x") == "hello x"


async def test_empty_root_boots(tmp_path: Path) -> None:
    async with booted(tmp_path) as kernel:
        assert kernel.registry.get_system_dump()["tools"] == {}


async def test_container_parameter_and_optional_defaults(root: Path) -> None:
    write(
        root,
        "domains/good/plugins/introspect.py",
        """
        from core import BasePlugin

        class Introspect(BasePlugin):
            def __init__(self, container, cache=None, greeter=None):
                self.container, self.cache, self.greeter = container, cache, greeter
    """,
    )
    async with booted(root) as kernel:
        plugin = kernel.plugins["good.Introspect"].instance
        assert plugin.container is kernel.container  # type: ignore[attr-defined]
        assert plugin.cache is None  # type: ignore[attr-defined]
        assert plugin.greeter is kernel.container.get("greeter")  # type: ignore[attr-defined]


async def test_sync_on_boot_runs_off_the_loop_with_identity(root: Path) -> None:
    write(
        root,
        "domains/good/plugins/threaded.py",
        """
        import threading
        from core import BasePlugin
        from core.context import current_identity_var

        class Threaded(BasePlugin):
            def on_boot(self):
                self.thread = threading.current_thread().name
                self.identity = current_identity_var.get()
    """,
    )
    async with booted(root) as kernel:
        plugin = kernel.plugins["good.Threaded"].instance
        assert plugin.thread.startswith("keel-hook-")  # type: ignore[attr-defined]
        assert plugin.identity == "good.Threaded.on_boot"  # type: ignore[attr-defined]


# -- the fault battery -----------------------------------------------------------------------


async def test_plugin_init_raises(root: Path) -> None:
    write(
        root,
        "domains/bad/plugins/broken.py",
        """
        from core import BasePlugin

        class Broken(BasePlugin):
            def __init__(self, greeter):
                raise RuntimeError("cannot construct")
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        broken = kernel.registry.get_system_dump()["plugins"]["bad.Broken"]
        assert broken["status"] == "DEAD"
        assert "RuntimeError: cannot construct" in broken["error"]


async def test_on_boot_raises(root: Path) -> None:
    write(
        root,
        "domains/bad/plugins/broken.py",
        """
        from core import BasePlugin

        class Broken(BasePlugin):
            async def on_boot(self):
                raise ValueError("no config")
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        broken = kernel.registry.get_system_dump()["plugins"]["bad.Broken"]
        assert broken["status"] == "DEAD"
        assert "on_boot() raised ValueError: no config" in broken["error"]
        assert "bad.Broken" not in kernel.plugins


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_on_boot_hangs(root: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLUGIN_BOOT_TIMEOUT", "0.2")
    body = "await asyncio.Event().wait()" if kind == "async" else "threading.Event().wait()"
    write(
        root,
        "domains/bad/plugins/hangs.py",
        f"""
        import asyncio, threading
        from core import BasePlugin

        class Hangs(BasePlugin):
            {"async " if kind == "async" else ""}def on_boot(self):
                {body}
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        hangs = kernel.registry.get_system_dump()["plugins"]["bad.Hangs"]
        assert hangs["status"] == "DEAD"
        assert "did not finish within 0.2s (PLUGIN_BOOT_TIMEOUT)" in hangs["error"]


async def test_missing_tool(root: Path) -> None:
    write(
        root,
        "domains/bad/plugins/needs.py",
        """
        from core import BasePlugin

        class Needs(BasePlugin):
            def __init__(self, greeter, db, cache):
                pass
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        needs = kernel.registry.get_system_dump()["plugins"]["bad.Needs"]
        assert needs["status"] == "DEAD"
        assert needs["error"] == "missing required tools: db, cache"
        assert needs["dependencies"] == ["greeter", "db", "cache"]


async def test_syntax_error(root: Path) -> None:
    write(root, "domains/bad/plugins/typo.py", "def broken(:\n    pass\n")
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        error = kernel.registry.get_system_dump()["load_errors"]["domains/bad/plugins/typo.py"]
        assert error.startswith("SyntaxError") and "line 1" in error


async def test_import_error(root: Path) -> None:
    write(root, "domains/bad/plugins/missing_dep.py", "import package_that_does_not_exist\n")
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        error = kernel.registry.get_system_dump()["load_errors"]["domains/bad/plugins/missing_dep.py"]
        assert "ModuleNotFoundError" in error and "package_that_does_not_exist" in error


async def test_tool_setup_raises(root: Path) -> None:
    write(
        root,
        "tools/broken/broken_tool.py",
        """
        from core import BaseTool

        class Broken(BaseTool):
            name = "broken"

            async def setup(self):
                raise ConnectionError("nobody listening on 5432")
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        broken = kernel.registry.get_system_dump()["tools"]["broken"]
        assert broken["status"] == "DEAD"
        assert "ConnectionError: nobody listening on 5432" in broken["message"]


async def test_tool_setup_hangs(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_SETUP_TIMEOUT", "0.2")
    write(
        root,
        "tools/slow/slow_tool.py",
        """
        import asyncio
        from core import BaseTool

        class Slow(BaseTool):
            name = "slow"

            async def setup(self):
                await asyncio.Event().wait()
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        slow = kernel.registry.get_system_dump()["tools"]["slow"]
        assert slow["status"] == "DEAD"
        assert slow["message"] == "setup() timed out after 0.2s (TOOL_SETUP_TIMEOUT)"


async def test_tool_not_configured_is_off(root: Path) -> None:
    write(
        root,
        "tools/mail/mail_tool.py",
        """
        from core import BaseTool, ToolNotConfiguredError

        class Mail(BaseTool):
            name = "mail"

            async def setup(self):
                raise ToolNotConfiguredError("set SMTP_URL to send mail")
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        mail = kernel.registry.get_system_dump()["tools"]["mail"]
        assert (mail["status"], mail["message"]) == ("OFF", "set SMTP_URL to send mail")


async def test_duplicate_tool_name_is_a_load_error_naming_both_files_and_the_rest_boots(root: Path) -> None:
    write(root, "tools/other/another_greeter.py", GREETER_TOOL)
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        error = kernel.registry.get_system_dump()["load_errors"]["tools/other/another_greeter.py"]
        assert "tools/greeter/greeter_tool.py" in error and "tools/other/another_greeter.py" in error
        assert (
            kernel.registry.get_system_dump()["tools"]["greeter"]["file"] == "tools/greeter/greeter_tool.py"
        )


async def test_a_tool_named_like_a_kernel_parameter_is_a_load_error(root: Path) -> None:
    write(root, "tools/bad/bad_tool.py", GREETER_TOOL.replace('name = "greeter"', 'name = "container"'))
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        assert (
            "may not be named 'container'"
            in kernel.registry.get_system_dump()["load_errors"]["tools/bad/bad_tool.py"]
        )


# -- SystemExit / KeyboardInterrupt from plugin and tool code: that part's failure ------------------

EXIT_TOOL_AT_IMPORT = """
    import sys
    sys.exit(3)
"""

EXIT_TOOL_IN = """
    import sys
    from core import BaseTool

    class Quitter(BaseTool):
        name = "quitter"

        def __init__(self):
            if {where!r} == "init":
                sys.exit(4)

        async def setup(self):
            if {where!r} == "setup":
                raise KeyboardInterrupt
"""

EXIT_PLUGIN = """
    import sys
    from core import BasePlugin

    if {where!r} == "import":
        sys.exit(5)

    class Quitter(BasePlugin):
        def __init__(self):
            if {where!r} == "init":
                sys.exit(6)

        {prefix}def on_boot(self):
            if {where!r} == "on_boot":
                sys.exit(7)
            if {where!r} == "interrupt":
                raise KeyboardInterrupt
"""


async def test_a_tool_that_exits_at_import_is_a_load_error(root: Path) -> None:
    write(root, "tools/quitter/quitter_tool.py", EXIT_TOOL_AT_IMPORT)
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        error = kernel.registry.get_system_dump()["load_errors"]["tools/quitter/quitter_tool.py"]
        assert error.startswith("SystemExit: 3")


@pytest.mark.parametrize(("where", "raised"), [("init", "SystemExit"), ("setup", "KeyboardInterrupt")])
async def test_a_tool_that_exits_in_init_or_setup_is_dead(root: Path, where: str, raised: str) -> None:
    write(root, "tools/quitter/quitter_tool.py", EXIT_TOOL_IN.format(where=where))
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        quitter = kernel.registry.get_system_dump()["tools"]["quitter"]
        assert quitter["status"] == "DEAD" and raised in quitter["message"]


@pytest.mark.parametrize("prefix", ["", "async "])
@pytest.mark.parametrize("where", ["init", "on_boot", "interrupt"])
async def test_a_plugin_that_exits_is_dead_and_the_rest_boots(root: Path, where: str, prefix: str) -> None:
    write(root, "domains/bad/plugins/quitter.py", EXIT_PLUGIN.format(where=where, prefix=prefix))
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        quitter = kernel.registry.get_system_dump()["plugins"]["bad.Quitter"]
        assert quitter["status"] == "DEAD"
        assert ("KeyboardInterrupt" if where == "interrupt" else "SystemExit") in quitter["error"]


async def test_a_plugin_file_that_exits_at_import_is_a_load_error(root: Path) -> None:
    write(root, "domains/bad/plugins/quitter.py", EXIT_PLUGIN.format(where="import", prefix=""))
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        assert kernel.registry.get_system_dump()["load_errors"]["domains/bad/plugins/quitter.py"].startswith(
            "SystemExit: 5"
        )


async def test_a_background_task_that_exits_fails_alone(root: Path) -> None:
    write(
        root,
        "domains/bad/plugins/quitter.py",
        """
        import sys
        from core import BasePlugin

        class Quitter(BasePlugin):
            def __init__(self, tasks):
                self.tasks = tasks

            async def on_boot(self):
                self.task = self.tasks.start(self.quit())

            async def quit(self):
                sys.exit(8)
        """,
    )
    async with booted(root) as kernel:
        task = kernel.plugins["bad.Quitter"].instance.task  # type: ignore[attr-defined]
        await asyncio.wait([task])
        assert "SystemExit(8)" in str(task.exception())
        assert_healthy_part_works(kernel)


BLOCKER = """
    import time
    from core import BasePlugin

    class Blocker(BasePlugin):
        async def on_boot(self):
            time.sleep(0.6)  # blocks the event loop, far beyond PLUGIN_BOOT_TIMEOUT
"""

PATIENT = """
    import asyncio
    from core import BasePlugin

    class Patient{i}(BasePlugin):
        {prefix}def on_boot(self):
            {body}
"""


async def test_a_hook_that_blocks_the_loop_is_blamed_not_the_others(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGIN_BOOT_TIMEOUT", "0.2")
    write(root, "domains/bad/plugins/blocker.py", BLOCKER)
    for i, (prefix, body) in enumerate(
        [("", "pass"), ("async ", "await asyncio.sleep(0.01)"), ("async ", "await asyncio.sleep(0)")]
    ):
        write(root, f"domains/calm/plugins/patient{i}.py", PATIENT.format(i=i, prefix=prefix, body=body))
    async with booted(root) as kernel:
        dump = kernel.registry.get_system_dump()["plugins"]
        assert {p: dump[f"calm.Patient{p}"]["status"] for p in range(3)} == dict.fromkeys(range(3), "READY")
        assert dump["bad.Blocker"]["status"] == "DEAD"
        assert "blocked the event loop for 0.6s in one step" in dump["bad.Blocker"]["error"]
        assert_healthy_part_works(kernel)


async def test_shutdown_is_bounded_when_plugin_code_swallows_cancellation(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHUTDOWN_TIMEOUT", "0.3")
    write(
        root,
        "domains/bad/plugins/stubborn.py",
        """
        import asyncio
        from core import BasePlugin

        class Stubborn(BasePlugin):
            def __init__(self, tasks):
                self.tasks = tasks
                self.stop = False

            async def on_boot(self):
                self.tasks.start(self.forever())

            async def forever(self):
                while not self.stop:
                    try:
                        await asyncio.sleep(0.01)
                    except asyncio.CancelledError:
                        pass

            async def on_shutdown(self):
                await self.forever()
        """,
    )
    kernel = Kernel(root)
    await kernel.boot()
    stubborn = kernel.plugins["bad.Stubborn"].instance
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(kernel.shutdown(), 5)
    assert loop.time() - started < 3
    stubborn.stop = True  # type: ignore[attr-defined]


async def test_metrics_sink_that_raises(root: Path) -> None:
    write(
        root,
        "domains/bad/plugins/sink.py",
        """
        from core import BasePlugin

        class BadSink(BasePlugin):
            def __init__(self, container, greeter):
                self.container, self.greeter = container, greeter

            async def on_boot(self):
                def sink(record):
                    raise RuntimeError("sink exploded")
                self.container.registry.add_metrics_sink(sink)
                self.result = self.greeter.greet("after sink")
    """,
    )
    async with booted(root) as kernel:
        assert kernel.plugins["bad.BadSink"].instance.result == "hello after sink"  # type: ignore[attr-defined]
        assert kernel.registry.tool_status("greeter") is ToolStatus.OK
        assert kernel.registry.plugin_status("bad.BadSink") is PluginStatus.READY


# -- shutdown --------------------------------------------------------------------------------


async def test_shutdown_runs_in_reverse_order_and_survives_failures(tmp_path: Path) -> None:
    root = tmp_path / "root"
    log = tmp_path / "order.log"
    for name in ("alpha", "beta"):
        write(
            root,
            f"tools/{name}/{name}_tool.py",
            f"""
            from core import BaseTool

            class T(BaseTool):
                name = "{name}"

                async def shutdown(self):
                    with open({str(log)!r}, "a") as f:
                        f.write("tool {name}\\n")
                    if "{name}" == "beta":
                        raise RuntimeError("close failed")
        """,
        )
    for name in ("one", "two"):
        write(
            root,
            f"domains/d/plugins/{name}.py",
            f"""
            from core import BasePlugin

            class P{name.title()}(BasePlugin):
                def on_shutdown(self):
                    with open({str(log)!r}, "a") as f:
                        f.write("plugin {name}\\n")
                    raise RuntimeError("plugin shutdown failed")
        """,
        )
    kernel = Kernel(root)
    await kernel.boot()
    await kernel.shutdown()
    assert log.read_text().splitlines() == ["plugin two", "plugin one", "tool beta", "tool alpha"]


async def test_two_roots_in_one_process_do_not_mix(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write(first, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    write(second, "tools/greeter/greeter_tool.py", GREETER_TOOL.replace("hello", "bonjour"))
    async with booted(first) as kernel:
        assert kernel.container.get("greeter").greet("a") == "hello a"
    async with booted(second) as kernel:
        assert kernel.container.get("greeter").greet("b") == "bonjour b"


async def test_dump_is_a_snapshot(root: Path) -> None:
    async with booted(root) as kernel:
        dump = kernel.registry.get_system_dump()
        dump["tools"]["greeter"]["status"] = "DEAD"
        dump["plugins"].clear()
        fresh = kernel.registry.get_system_dump()
        assert fresh["tools"]["greeter"]["status"] == "OK"
        assert "good.Caller" in fresh["plugins"]


async def test_linked_tool_folders_are_discovered(tmp_path: Path) -> None:
    source = tmp_path / "elsewhere"
    write(source, "greeter/greeter_tool.py", GREETER_TOOL)
    root = tmp_path / "root"
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "greeter").symlink_to(source / "greeter", target_is_directory=True)
    async with booted(root) as kernel:
        assert kernel.container.get("greeter").greet("link") == "hello link"


async def test_on_boot_raising_cancelled_error_is_only_that_plugins_failure(root: Path) -> None:
    write(
        root,
        "domains/bad/plugins/cancels.py",
        """
        import asyncio
        from core import BasePlugin

        class Cancels(BasePlugin):
            async def on_boot(self):
                raise asyncio.CancelledError()
    """,
    )
    async with booted(root) as kernel:
        assert_healthy_part_works(kernel)
        cancels = kernel.registry.get_system_dump()["plugins"]["bad.Cancels"]
        assert (cancels["status"], cancels["error"]) == ("DEAD", "on_boot() was cancelled")


async def test_shutdown_goes_on_past_a_hook_raising_cancelled_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    log = tmp_path / "order.log"
    write(
        root,
        "tools/alpha/alpha_tool.py",
        f"""
        from core import BaseTool

        class Alpha(BaseTool):
            name = "alpha"

            async def shutdown(self):
                with open({str(log)!r}, "a") as f:
                    f.write("tool alpha\\n")
    """,
    )
    write(
        root,
        "domains/d/plugins/p.py",
        """
        import asyncio
        from core import BasePlugin

        class P(BasePlugin):
            async def on_shutdown(self):
                raise asyncio.CancelledError()
    """,
    )
    kernel = Kernel(root)
    await kernel.boot()
    await kernel.shutdown()
    assert log.read_text().splitlines() == ["tool alpha"]


async def test_one_server_failing_stops_the_others(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(
        root,
        "tools/servers/servers.py",
        """
        import asyncio
        from core import BaseTool

        class Broken(BaseTool):
            name = "broken_server"

            async def serve(self, stop):
                raise OSError("address already in use")

        class Patient(BaseTool):
            name = "patient_server"

            async def serve(self, stop):
                await stop.wait()
    """,
    )
    kernel = Kernel(root)
    await kernel.boot()
    try:
        served = await asyncio.wait_for(kernel.serve(), 10)
    finally:
        await kernel.shutdown()
    assert served is False


async def test_a_link_back_up_the_tools_tree_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "tools/greeter/greeter_tool.py", GREETER_TOOL)
    (root / "tools" / "greeter" / "again").symlink_to(root / "tools" / "greeter", target_is_directory=True)
    async with booted(root) as kernel:
        assert kernel.container.get("greeter").greet("once") == "hello once"


TASK_CRASHER = """
    import asyncio
    from core import BasePlugin

    class Crasher(BasePlugin):
        def __init__(self, tasks):
            self.tasks = tasks

        async def on_boot(self):
            self.tracked = self.tasks.start(self.crash("tracked"))
            self.raw = asyncio.create_task(self.crash("raw"))

        async def crash(self, which):
            raise RuntimeError(f"the {which} task fell over")
"""


async def test_a_crashed_background_task_marks_its_plugin_degraded(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(root, "domains/bad/plugins/crasher.py", TASK_CRASHER)
    async with booted(root) as kernel:
        crasher = kernel.plugins["bad.Crasher"].instance
        await asyncio.wait([crasher.tracked])  # type: ignore[attr-defined]
        plugin = kernel.registry.get_system_dump()["plugins"]["bad.Crasher"]
        assert plugin["status"] == "READY"
        assert "the tracked task fell over" in plugin["degraded"]
        await asyncio.wait([crasher.raw])  # type: ignore[attr-defined]
        del crasher.raw  # type: ignore[attr-defined]  # never retrieved: asyncio reports it when it is freed
        del crasher
        gc.collect()
        await until(
            lambda: (
                "the raw task fell over"
                in (kernel.registry.get_system_dump()["plugins"]["bad.Crasher"]["degraded"] or "")
            ),
            "the raw task's crash is attributed",
        )
        assert "bad.Crasher: a task it created with asyncio.create_task crashed" in caplog.text
        assert_healthy_part_works(kernel)


GC_WATCHER_TOOL = """
    import asyncio
    import gc
    import os
    import signal
    from core import BaseTool

    class GcWatcher(BaseTool):
        name = "gc_watcher"
        collecting_in_setup = None

        async def setup(self):
            GcWatcher.collecting_in_setup = gc.isenabled()
            if os.environ.get("GC_HOLD_SETUP"):
                await asyncio.Event().wait()

        async def serve(self, stop):
            report = os.environ.get("GC_REPORT")
            if report:
                with open(report, "w") as out:
                    out.write(str(gc.get_freeze_count()))
                os.kill(os.getpid(), signal.SIGTERM)
            await stop.wait()
"""


def collecting_in_setup(kernel: Kernel) -> bool | None:
    tools = kernel.lifecycle.tools
    return getattr(type(tools[0]), "collecting_in_setup", None) if tools else None


async def test_boot_pauses_the_cyclic_collector_and_puts_it_back_as_it_was(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "tools/gc_watcher/gc_watcher.py", GC_WATCHER_TOOL)
    assert gc.isenabled()
    async with booted(root) as kernel:
        assert collecting_in_setup(kernel) is False
        assert gc.isenabled()
    gc.disable()
    try:
        async with booted(root):
            assert not gc.isenabled()  # paused by the caller: boot does not turn it on
    finally:
        gc.enable()


async def test_a_cancelled_boot_still_puts_the_collector_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    write(root, "tools/gc_watcher/gc_watcher.py", GC_WATCHER_TOOL)
    monkeypatch.setenv("GC_HOLD_SETUP", "1")
    kernel = Kernel(root)
    booting = asyncio.create_task(kernel.boot())
    await until(lambda: collecting_in_setup(kernel) is not None, "the tool's setup started")
    assert not gc.isenabled()
    booting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await booting
    assert gc.isenabled()
    await kernel.shutdown()


def test_a_serving_process_freezes_what_boot_built(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "tools/gc_watcher/gc_watcher.py", GC_WATCHER_TOOL)
    report = tmp_path / "frozen"
    project = str(Path(__file__).resolve().parents[2])
    code = f"import sys; sys.path.insert(0, {project!r}); from core import Kernel; "
    code += f"sys.exit(Kernel({str(root)!r}).run())"
    env = {**os.environ, "GC_REPORT": str(report)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(report.read_text()) > 1000  # the modules, tools and registry boot made
