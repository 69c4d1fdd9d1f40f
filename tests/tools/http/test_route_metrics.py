"""Per-route metrics: bounded by routes, not by traffic; percentiles, statuses and a rate series."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from core.context import bound, current_plugin_var
from tests.kit import make_root, serving, write
from tests.tools.http.http_kit import client, make_http
from tools.http.route_metrics import BUCKET_SECONDS, RouteMetrics, percentile


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_percentiles_are_nearest_rank() -> None:
    ordered = [float(n) for n in range(1, 101)]
    assert (percentile(ordered, 50), percentile(ordered, 95), percentile(ordered, 99)) == (
        50.0,
        95.0,
        99.0,
    )
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0


def test_a_route_keeps_a_bounded_window_statuses_and_a_rate_series() -> None:
    clock = Clock()
    metrics = RouteMetrics(window=10, buckets=6, clock=clock)
    for n in range(25):
        metrics.record("GET", "/items/{id}", 200 if n % 5 else 404, float(n))
    clock.now += BUCKET_SECONDS  # the next bucket
    metrics.record("GET", "/items/{id}", 500, 1000.0)
    (route,) = metrics.snapshot()
    assert route["count"] == 26
    assert route["statuses"] == {"200": 20, "404": 5, "500": 1}
    assert (route["errors"], route["server_errors"]) == (6, 1)
    assert route["p99_ms"] == 1000.0 and route["p50_ms"] == 20.0  # the last ten durations only
    assert route["series"] == [0, 0, 0, 0, 25, 1]
    assert route["rate_per_s"] == round(26 / 60, 3)
    clock.now += BUCKET_SECONDS * 10  # quiet for a while: old buckets leave the series
    assert metrics.snapshot()[0]["series"] == [0] * 6
    metrics.forget("GET", "/items/{id}")
    assert metrics.snapshot() == []


def test_an_event_stream_counts_toward_the_rate_but_not_the_latency() -> None:
    metrics = RouteMetrics(clock=Clock())
    metrics.record("GET", "/feed", 200, None)
    (route,) = metrics.snapshot()
    assert route["count"] == 1 and route["p50_ms"] is None


PLUGIN = """
    from core import BasePlugin, NotFoundError


    class Items(BasePlugin):
        def __init__(self, http):
            self.http = http

        def on_boot(self):
            self.http.add_endpoint("/items/{item_id:int}", "GET", self.item)

        async def item(self, data, context):
            if data["item_id"] > 2:
                raise NotFoundError("no such item")
            return {"id": data["item_id"]}
"""


async def test_a_served_route_is_measured_by_its_template(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http",), domains=("system",))
    write(root, "domains/shop/plugins/items.py", PLUGIN)
    async with serving(root) as (kernel, base_url):
        async with httpx.AsyncClient(base_url=base_url) as client:
            for item in (1, 2, 3, 4, 1):
                await client.get(f"/items/{item}")
            await client.get("/nowhere")  # matches no route: not a route of its own
            body = (await client.get("/system/metrics/routes")).json()
    routes = {(r["method"], r["path"]): r for r in body["routes"]}
    items = routes[("GET", "/items/{item_id:int}")]
    assert items["count"] == 5
    assert items["statuses"] == {"200": 3, "404": 2}
    assert items["p50_ms"] is not None and items["p50_ms"] > 0
    assert not any("nowhere" in path for _, path in routes)
    assert body["per_process"] is True


async def test_a_route_registered_again_after_its_plugin_left_counts_from_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)

    async def orders(data: dict[str, Any], context: dict[str, Any]) -> str:
        return "orders"

    def counts() -> dict[str, int]:
        return {route["path"]: route["count"] for route in http.get_route_metrics()}

    with bound(current_plugin_var, "shop.Orders"):
        http.add_endpoint("/orders", "GET", orders)
    async with client(http) as c:
        for _ in range(3):
            assert (await c.get("/orders")).status_code == 200
        assert counts() == {"/orders": 3}
        http.release_owner("shop.Orders")
        assert counts() == {}
        with bound(current_plugin_var, "shop.Orders"):
            http.add_endpoint("/orders", "GET", orders)  # the plugin reloaded
        assert (await c.get("/orders")).status_code == 200
        assert counts() == {"/orders": 1}
        with bound(current_plugin_var, "shop.Orders"):
            http.add_endpoint("/orders", "GET", orders)  # replaced while registered: the count goes on
        assert (await c.get("/orders")).status_code == 200
        assert counts() == {"/orders": 2}
