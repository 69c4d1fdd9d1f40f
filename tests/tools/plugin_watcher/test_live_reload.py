"""Plugin files added, changed, broken, deleted and renamed under a served kernel while clients
keep calling it: no 5xx, no connection error, and each route answers from the right version.

The real path end to end: a file is written, the ``plugin_watcher`` tool sees it, the kernel's
plugin host reloads it, uvicorn serves the result to an httpx request loop.
"""

from __future__ import annotations

import asyncio
import functools
import os
from pathlib import Path

import httpx
import pytest

from tests.kit import PING_PLUGIN, until, write
from tests.tools.plugin_watcher.watch_kit import (
    RequestLoop,
    answers,
    collapse,
    dump,
    items,
    plugin_file,
    watched_root,
    watching,
)

ITEMS_FILE = "domains/shop/plugins/items.py"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = watched_root(tmp_path)
    write(root, "domains/shop/plugins/ping.py", PING_PLUGIN)
    return root


def assert_steady_ping(loop: RequestLoop) -> None:
    for answers_ in loop.history("/ping"):
        assert {a.status for a in answers_} == {200}


async def test_a_file_dropped_in_serves_its_routes_and_subscriptions(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with watching(root, monkeypatch) as (kernel, base_url):
        async with RequestLoop(base_url, ("/items", "/ping")) as loop:
            write(root, ITEMS_FILE, items(1))
            await until(lambda: answers(base_url, "/items", 1), "/items answers version 1")
            await loop.until_every_worker_sees("/items", 200, 1)
        assert loop.failures == []
        assert_steady_ping(loop)
        for history in loop.history("/items"):
            assert collapse(history) == [(404, None), (200, 1)]

        async with httpx.AsyncClient(base_url=base_url) as client:
            schema = (await client.get("/openapi.json")).json()
            assert schema["paths"]["/items"]["get"]["tags"] == ["shop"]
            assert (await client.get("/docs")).status_code == 200
        assert await kernel.container.get("event_bus").request("items.version") == 1
        assert dump(kernel)["plugins"]["shop.Items"]["status"] == "READY"
        await until(lambda: "/items" in (root / "AI_CONTEXT.md").read_text(), "AI_CONTEXT.md lists /items")


async def test_a_changed_file_switches_to_the_new_version_without_a_gap(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root, ITEMS_FILE, items(1))
    async with watching(root, monkeypatch) as (kernel, base_url):
        bus = kernel.container.get("event_bus")
        async with RequestLoop(base_url, ("/items", "/ping")) as loop:
            for version in (2, 3):
                write(root, ITEMS_FILE, items(version))
                await until(
                    functools.partial(answers, base_url, "/items", version),
                    f"/items answers version {version}",
                )
                # every client sees each version before the next change, so each history holds all three
                await loop.until_every_worker_sees("/items", 200, version)
                assert await bus.request("items.version") == version
        assert loop.failures == []
        assert_steady_ping(loop)
        for history in loop.history("/items"):
            # never a missing route, never back to an old version
            assert collapse(history) == [(200, 1), (200, 2), (200, 3)]
        subscribers = [s for s in bus.subscriptions() if s["event"] == "items.version"]
        assert [s["owner"] for s in subscribers] == ["shop.Items"]


BROKEN = {
    "syntax error": ("def list_items(:\n", "SyntaxError"),
    "on_boot raises": (
        items(2).replace(
            "async def on_boot(self):", "async def on_boot(self):\n            raise RuntimeError('no')"
        ),
        "on_boot() raised RuntimeError: no",
    ),
    "missing tool": (
        items(2).replace(
            "def __init__(self, http, event_bus):", "def __init__(self, http, event_bus, mailer):"
        ),
        "missing required tools: mailer",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
async def test_a_broken_change_leaves_the_old_version_serving(
    root: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    source, expected = BROKEN[case]
    write(root, ITEMS_FILE, items(1))
    async with watching(root, monkeypatch) as (kernel, base_url):
        async with RequestLoop(base_url, ("/items", "/ping")) as loop:
            write(root, ITEMS_FILE, source)
            await until(
                lambda: expected in (dump(kernel)["plugins"]["shop.Items"]["reload_error"] or ""),
                "the dump shows the failed reload",
            )
            assert await answers(base_url, "/items", 1)
            watch = dump(kernel)["kernel"]["capabilities"]["plugin_watch"]
            assert watch["recent"][-1]["action"] == "failed"
            assert expected in " ".join(watch["recent"][-1]["errors"].values())
            assert (ITEMS_FILE in dump(kernel)["load_errors"]) == (case == "syntax error")

            write(root, ITEMS_FILE, items(2))
            await until(lambda: answers(base_url, "/items", 2), "/items answers version 2 once fixed")
            await loop.until_every_worker_sees("/items", 200, 2)
        assert loop.failures == []
        for history in loop.history("/items"):
            assert collapse(history) == [(200, 1), (200, 2)]
        state = dump(kernel)["plugins"]["shop.Items"]
        assert (state["status"], state["reload_error"]) == ("READY", None)
        assert dump(kernel)["load_errors"] == {}


async def test_a_deleted_file_takes_its_routes_and_subscriptions_away(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root, ITEMS_FILE, items(1))
    async with watching(root, monkeypatch) as (kernel, base_url):
        async with RequestLoop(base_url, ("/items", "/ping")) as loop:
            os.unlink(root / ITEMS_FILE)
            await until(lambda: answers(base_url, "/items", None), "/items answers 404")
            await loop.until_every_worker_sees("/items", 404)
        assert loop.failures == []
        assert_steady_ping(loop)
        for history in loop.history("/items"):
            assert collapse(history) == [(200, 1), (404, None)]
        async with httpx.AsyncClient(base_url=base_url) as client:
            assert "/items" not in (await client.get("/openapi.json")).json()["paths"]
        bus = kernel.container.get("event_bus")
        assert [s for s in bus.subscriptions() if s["event"] == "items.version"] == []
        assert "shop.Items" not in dump(kernel)["plugins"]
        await until(
            lambda: "/items" not in (root / "AI_CONTEXT.md").read_text(), "AI_CONTEXT.md drops /items"
        )


async def test_a_renamed_file_keeps_its_plugin_serving(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, ITEMS_FILE, items(1))
    renamed = plugin_file(root, "catalogue.py")
    async with watching(root, monkeypatch) as (kernel, base_url):
        async with RequestLoop(base_url, ("/items", "/ping")) as loop:
            os.rename(root / ITEMS_FILE, renamed)
            await until(
                lambda: (
                    dump(kernel)["plugins"].get("shop.Items", {}).get("file")
                    == "domains/shop/plugins/catalogue.py"
                ),
                "the plugin now comes from catalogue.py",
            )
            write(root, "domains/shop/plugins/catalogue.py", items(2))
            await until(lambda: answers(base_url, "/items", 2), "/items answers from catalogue.py")
            await loop.until_every_worker_sees("/items", 200, 2)
        assert loop.failures == []
        for history in loop.history("/items"):
            assert collapse(history) == [(200, 1), (200, 2)]
        assert kernel.plugins["shop.Items"].file == renamed


GATE_TOOL = """
    import asyncio
    from core import BaseTool


    class Gate(BaseTool):
        '''Holds requests until the test opens it; notes what plugins tell it.'''

        name = "gate"

        def __init__(self):
            self.arrived = 0
            self.notes = []
            self.opened = asyncio.Event()

        def arrive(self):
            self.arrived += 1

        async def wait_open(self):
            await self.opened.wait()

        def note(self, text):
            self.notes.append(text)
"""

SLOW = """
    from core import BasePlugin


    class Slow(BasePlugin):
        def __init__(self, http, gate):
            self.http = http
            self.gate = gate

        def on_boot(self):
            self.http.add_endpoint("/slow", "GET", self.slow)

        async def slow(self, data, context):
            if VERSION == 1:
                self.gate.arrive()
                await self.gate.wait_open()
            return {"version": VERSION}

        def on_shutdown(self):
            self.gate.note(f"shutdown {VERSION}")


    VERSION = {version}
"""


async def test_a_request_in_flight_finishes_on_the_old_version_before_it_shuts_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = watched_root(tmp_path, tools=("http", "plugin_watcher"))
    write(root, "tools/gate/gate_tool.py", GATE_TOOL)
    write(root, "domains/shop/plugins/slow.py", SLOW.replace("{version}", "1"))
    async with watching(root, monkeypatch) as (kernel, base_url):
        gate = kernel.container.get_raw_tools()["gate"]
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            held = asyncio.create_task(client.get("/slow"))
            await until(lambda: gate.arrived == 1, "the first request reached version 1")  # type: ignore[attr-defined]
            first = kernel.plugins["shop.Slow"].instance
            write(root, "domains/shop/plugins/slow.py", SLOW.replace("{version}", "2"))
            # Only ask once version 2 runs: a request that reached version 1 would wait at the gate.
            await until(lambda: kernel.plugins["shop.Slow"].instance is not first, "version 2 runs")
            assert await answers(base_url, "/slow", 2)
            assert gate.notes == []  # type: ignore[attr-defined]  # version 1 waits for its request
            gate.opened.set()  # type: ignore[attr-defined]
            response = await held
            assert (response.status_code, response.json()) == (200, {"version": 1})
            await until(lambda: gate.notes == ["shutdown 1"], "version 1 shut down after its request")  # type: ignore[attr-defined]
