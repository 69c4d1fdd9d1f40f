"""The fault battery in a real process: broken plugin and tool files next to healthy ones.

The rest keeps serving (status, health, a plugin route), each broken part's reason is in the dump,
and SIGTERM ends the process within its bound even though plugin code swallows cancellation,
saying what it abandoned."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx

from tests.domains.system.process_kit import keel_process
from tests.kit import make_root, write

HEALTHY = """
    from core import BasePlugin

    class Hello(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/hello", "GET", self.hello)

        async def hello(self, data, context):
            return {"hello": True}
"""

FAULTS = {
    "domains/aaa/plugins/impostor.py": """
        from core import BasePlugin

        class Impostor(BasePlugin):
            def __init__(self, http):
                self.http = http

            async def on_boot(self):  # async, as Me's: they start in file order
                self.http.add_endpoint("/x/{id}", "GET", self.by_id)
                self.http.add_endpoint("/system/status", "GET", self.by_id)

            async def by_id(self, data, context):
                return {"impostor": True}
    """,
    "domains/bbb/plugins/me.py": """
        from core import BasePlugin

        class Me(BasePlugin):
            def __init__(self, http):
                self.http = http

            async def on_boot(self):
                self.http.add_endpoint("/x/me", "GET", self.me)
                self.http.add_endpoint("/x/{id}", "GET", self.me)  # shadowing the other: refused

            async def me(self, data, context):
                return {"me": True}
    """,
    "tools/quitter/quitter_tool.py": """
        import sys
        sys.exit(2)
    """,
    "tools/twin/logger_twin.py": """
        from core import BaseTool

        class LoggerTwin(BaseTool):
            name = "logger"
    """,
    "domains/aaa/plugins/exit_on_boot.py": """
        import sys
        from core import BasePlugin

        class ExitOnBoot(BasePlugin):
            async def on_boot(self):
                sys.exit(1)
    """,
    "domains/aaa/plugins/blocks_the_loop.py": """
        import time
        from core import BasePlugin

        class BlocksTheLoop(BasePlugin):
            async def on_boot(self):
                time.sleep(1.5)
    """,
    "domains/aaa/plugins/stubborn.py": """
        import asyncio
        import sys
        from core import BasePlugin, ToolUnavailableError

        class Stubborn(BasePlugin):
            def __init__(self, http, tasks):
                self.http = http
                self.tasks = tasks

            def on_boot(self):
                self.tasks.start(self.forever())
                self.http.add_endpoint("/exit", "GET", self.exit)
                self.http.add_endpoint("/outage", "GET", self.outage)

            async def forever(self):
                while True:
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        pass  # swallowed: the kernel must abandon it, not wait forever

            async def exit(self, data, context):
                sys.exit(9)

            async def outage(self, data, context):
                raise ToolUnavailableError("the database is gone")
    """,
}


async def test_broken_parts_fail_alone_and_sigterm_is_bounded(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system",))
    write(root, "domains/demo/plugins/hello.py", HEALTHY)
    for path, source in FAULTS.items():
        write(root, path, source)
    env = {
        "PORT": "0",
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "INFO",
        "PLUGIN_BOOT_TIMEOUT": "0.5",
        "SHUTDOWN_TIMEOUT": "0.5",
        "SHUTDOWN_GRACE_SECONDS": "1",
        "AUTH_SECRET_KEY": "",
    }
    async with (
        keel_process(root, tmp_path / "keel.log", env) as keel,
        httpx.AsyncClient(base_url=keel.url, timeout=10) as client,
    ):
        assert (await client.get("/hello")).json() == {"hello": True}
        health = await client.get("/system/health")
        assert health.status_code == 200, health.text
        dump = (await client.get("/system/status")).json()
        assert {p: dump["plugins"][p]["status"] for p in dump["plugins"] if p.startswith("system.")} == {
            p: "READY" for p in dump["plugins"] if p.startswith("system.")
        }
        errors = dump["load_errors"]
        assert errors["tools/quitter/quitter_tool.py"].startswith("SystemExit: 2")
        assert "two tools are named 'logger'" in errors["tools/twin/logger_twin.py"]
        assert "SystemExit(1)" in dump["plugins"]["aaa.ExitOnBoot"]["error"]
        assert "blocked the event loop" in dump["plugins"]["aaa.BlocksTheLoop"]["error"]
        assert dump["plugins"]["aaa.Stubborn"]["status"] == "READY"
        assert "belong to the system domains" in dump["plugins"]["aaa.Impostor"]["error"]
        assert "already registered by aaa.Impostor" in dump["plugins"]["bbb.Me"]["error"]
        assert "kernel" in dump  # the real /system/status answered, not the impostor

        exit_call = await client.get("/exit")
        assert (exit_call.status_code, exit_call.json()["error"]["kind"]) == (500, "internal")
        outage = await client.get("/outage")
        assert (outage.status_code, outage.headers["retry-after"]) == (503, "5")
        assert (await client.get("/hello")).status_code == 200  # still alive after the handler's exit

        loop = asyncio.get_running_loop()
        keel.process.send_signal(signal.SIGTERM)
        started = loop.time()
        async with asyncio.timeout(20):
            code = await keel.process.wait()
        elapsed = loop.time() - started
    output = keel.output()
    assert code == 0, output
    assert elapsed < 10, output
    assert "abandoned" in output and "Stubborn.forever" in output
