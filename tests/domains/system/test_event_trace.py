"""The event trace endpoints: the causal tree of a root and the live stream of trace records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.context import bound, current_event_id_var
from core.errors import InvalidInputError, NotFoundError
from domains.system.plugins.event_trace import EventTracePlugin
from tests.kit import booted, make_root, serving, sse_events, write
from tools.event_bus.event_bus_tool import EventBusTool
from tools.event_bus.events import Event


class RecordingHttp:
    """Stands in for the http tool: remembers what was registered."""

    def __init__(self) -> None:
        self.routes: dict[str, dict[str, Any]] = {}

    def add_endpoint(self, path: str, method: str, handler: Callable[..., Any], **options: Any) -> None:
        self.routes[f"{method} {path}"] = {"handler": handler, **options}

    def add_sse_endpoint(self, path: str, stream: Callable[..., Any], **options: Any) -> None:
        self.routes[f"SSE {path}"] = {"handler": stream, **options}


@pytest.fixture
async def bus() -> AsyncIterator[EventBusTool]:
    event_bus = EventBusTool()
    yield event_bus
    await event_bus.shutdown()


async def settled(bus: EventBusTool, count: int) -> None:
    """Wait (bounded) until ``count`` trace records are complete."""
    async with asyncio.timeout(5):
        seen = 0
        async for _ in bus.trace_stream(after=0):
            seen += 1
            if seen == count:
                return


async def chain_of_three(bus: EventBusTool, request_id: str) -> list[str]:
    """``a`` -> ``b`` -> ``c`` published from a request; returns the three event ids."""
    ids: list[str] = []

    async def on_a(event: Event) -> None:
        await bus.publish("b")

    async def on_b(event: Event) -> None:
        await bus.publish("c")

    await bus.subscribe("a", on_a)
    await bus.subscribe("b", on_b)
    with bound(current_event_id_var, request_id):
        ids.append(await bus.publish("a"))
    await settled(bus, 3)
    ids += [r["id"] for r in bus.trace_records()[1:]]
    return ids


# -- the plugin on its own ----------------------------------------------------------------------


async def test_registers_both_endpoints_as_admin_only(bus: EventBusTool) -> None:
    http = RecordingHttp()
    plugin = EventTracePlugin(http, bus)
    await plugin.on_boot()
    assert {key: (route["auth"], route["tags"]) for key, route in http.routes.items()} == {
        "GET /system/events/tree": ("admin", ["system"]),
        "SSE /system/events/stream": ("admin", ["system"]),
    }


async def test_without_an_event_bus_nothing_is_registered() -> None:
    http = RecordingHttp()
    await EventTracePlugin(http).on_boot()
    assert http.routes == {}


async def test_tree_of_a_request_id_nests_the_whole_chain(bus: EventBusTool) -> None:
    a, b, c = await chain_of_three(bus, "req-7")
    tree = await EventTracePlugin(RecordingHttp(), bus).tree({"root": "req-7"}, {})
    assert (tree["id"], [n["id"] for n in tree["children"]]) == ("req-7", [a])
    [node_a] = tree["children"]
    [node_b] = node_a["children"]
    [node_c] = node_b["children"]
    assert (node_a["name"], node_b["name"], node_c["name"]) == ("a", "b", "c")
    assert (node_b["id"], node_b["parent_id"], node_c["id"], node_c["parent_id"]) == (b, a, c, b)
    assert node_c["children"] == [] and node_c["complete"] is True
    subtree = await EventTracePlugin(RecordingHttp(), bus).tree({"root": b}, {})
    assert [n["id"] for n in subtree["children"]] == [c]


@pytest.mark.parametrize(("data", "error"), [({}, InvalidInputError), ({"root": "  "}, InvalidInputError)])
async def test_tree_needs_a_root(bus: EventBusTool, data: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match="root"):
        await EventTracePlugin(RecordingHttp(), bus).tree(data, {})


async def test_tree_of_an_unknown_root_is_not_found(bus: EventBusTool) -> None:
    with pytest.raises(NotFoundError, match="EVENT_TRACE_BUFFER"):
        await EventTracePlugin(RecordingHttp(), bus).tree({"root": "nobody"}, {})


async def test_stream_sends_records_as_trace_events_and_replays_after_last_event_id(
    bus: EventBusTool,
) -> None:
    plugin = EventTracePlugin(RecordingHttp(), bus)
    first = await bus.publish("one")
    second = await bus.publish("two")
    events = plugin.stream({}, {"last_event_id": "1"})
    async with asyncio.timeout(5):
        replayed = await anext(events)
        third = await bus.publish("three")
        live = await anext(events)
    await events.aclose()
    assert (replayed["event"], replayed["id"], replayed["data"]["id"]) == ("trace", "2", second)
    assert (live["id"], live["data"]["id"]) == ("3", third)
    assert first not in (second, third)


async def test_stream_refuses_a_malformed_last_event_id(bus: EventBusTool) -> None:
    events = EventTracePlugin(RecordingHttp(), bus).stream({}, {"last_event_id": "abc"})
    with pytest.raises(InvalidInputError, match="last_event_id"):
        await anext(events)


# -- through the kernel and HTTP ------------------------------------------------------------------

ORDERS_PLUGIN = """
    from core import BasePlugin


    class Orders(BasePlugin):
        def __init__(self, http, event_bus):
            self.http = http
            self.event_bus = event_bus

        async def on_boot(self):
            self.http.add_endpoint("/orders", "POST", self.create, status_code=201)
            await self.event_bus.subscribe("order.created", self.charge)
            await self.event_bus.subscribe("order.charged", self.ship)

        async def create(self, data, context):
            return {"event": await self.event_bus.publish("order.created", {"sku": data["sku"]})}

        async def charge(self, event):
            await self.event_bus.publish("order.charged", dict(event.payload))

        async def ship(self, event):
            await self.event_bus.publish("order.shipped", dict(event.payload))
"""


async def test_a_request_chain_seen_through_the_system_endpoints(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http", "logger", "event_bus"), domains=("system",))
    write(root, "domains/shop/plugins/orders.py", ORDERS_PLUGIN)
    async with serving(root) as (kernel, url), httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with client.stream("GET", "/system/events/stream") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = sse_events(stream)
            response = await client.post(
                "/orders", json={"sku": "A-1"}, headers={"X-Request-ID": "checkout-1"}
            )
            assert response.status_code == 201
            names = []
            async with asyncio.timeout(10):
                async for event in events:
                    assert event["event"] == "trace"
                    names.append(event["data"]["name"])
                    if len(names) == 3:
                        break
        assert sorted(names) == ["order.charged", "order.created", "order.shipped"]
        tree = (await client.get("/system/events/tree", params={"root": "checkout-1"})).json()
        created = tree["children"][0]
        assert (created["id"], created["name"], created["emitter"]) == (
            response.json()["event"],
            "order.created",
            "shop.Orders.create",
        )
        charged = created["children"][0]
        assert (charged["name"], charged["emitter"]) == ("order.charged", "shop.Orders.charge")
        assert charged["children"][0]["name"] == "order.shipped"
        missing = await client.get("/system/events/tree", params={"root": "nope"})
        assert (missing.status_code, missing.json()["error"]["kind"]) == (404, "not_found")


async def test_a_root_without_an_event_bus_keeps_the_plugin_healthy(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http", "logger"), domains=("system",))
    async with booted(root) as kernel:
        plugins = kernel.registry.get_system_dump()["plugins"]
        assert plugins["system.EventTracePlugin"]["status"] == "READY"
        routes = {r["path"] for r in kernel.container.get("http").get_endpoints()}
        assert not any(path.startswith("/system/events") for path in routes)
