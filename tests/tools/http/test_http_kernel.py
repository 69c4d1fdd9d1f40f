"""The http tool inside a kernel: a plugin's routes come and go with the plugin."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.kit import booted, make_root, write

PLUGIN = """
    from core import BasePlugin


    class Orders(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/orders", "GET", self.list_orders)

        async def list_orders(self, data, context):
            return {"version": VERSION}


    VERSION = {version}
"""


async def test_unloading_a_plugin_removes_its_routes_and_reloading_restores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PORT", raising=False)
    root = make_root(tmp_path, tools=("http",))
    plugin_file = write(root, "domains/shop/plugins/orders.py", PLUGIN.replace("{version}", "1"))
    async with booted(root) as kernel:
        http = kernel.container.get_raw_tools()["http"]
        transport = httpx.ASGITransport(app=http.asgi)  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=transport, base_url="http://keel.test") as client:
            assert (await client.get("/orders")).json() == {"version": 1}
            await kernel.unload_plugin("shop.Orders")
            assert (await client.get("/orders")).status_code == 404
            assert "/orders" not in (await client.get("/openapi.json")).json()["paths"]
            write(root, "domains/shop/plugins/orders.py", PLUGIN.replace("{version}", "2"))
            await kernel.load_plugin_file(plugin_file, fresh=True)
            assert (await client.get("/orders")).json() == {"version": 2}
            await kernel.load_plugin_file(plugin_file, fresh=True)  # the same owner replaces its route
            assert (await client.get("/orders")).json() == {"version": 2}
