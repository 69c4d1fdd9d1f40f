"""Routes belong to the plugin that registered them; OpenAPI documents them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from core.context import bound, current_plugin_var
from tests.tools.http.http_kit import client, make_http


class Order(BaseModel):
    sku: str
    quantity: int


class Receipt(BaseModel):
    order_id: int


async def first(data: dict[str, Any], context: dict[str, Any]) -> str:
    return "first"


async def second(data: dict[str, Any], context: dict[str, Any]) -> str:
    return "second"


async def test_another_owner_cannot_take_a_route(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    with bound(current_plugin_var, "shop.Orders"):
        http.add_endpoint("/orders", "POST", first)
    with bound(current_plugin_var, "billing.Orders"), pytest.raises(ValueError) as raised:
        http.add_endpoint("/orders", "post", second)
    assert "shop.Orders" in str(raised.value) and "billing.Orders" in str(raised.value)
    with bound(current_plugin_var, "billing.Orders"):
        http.add_endpoint("/orders", "GET", second)  # another method is another route
    async with client(http) as c:
        assert (await c.post("/orders")).json() == "first"


async def test_the_same_owner_replaces_its_route(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    with bound(current_plugin_var, "shop.Orders"):
        http.add_endpoint("/orders", "GET", first)
        http.add_endpoint("/orders", "GET", second)
    async with client(http) as c:
        assert (await c.get("/orders")).json() == "second"
    assert len([e for e in http.get_endpoints() if e["path"] == "/orders"]) == 1


async def test_release_owner_removes_its_routes_and_their_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    with bound(current_plugin_var, "shop.Orders"):
        http.add_endpoint("/orders", "GET", first)
    with bound(current_plugin_var, "shop.Stock"):
        http.add_endpoint("/stock", "GET", second)
    async with client(http) as c:
        assert "/orders" in (await c.get("/openapi.json")).json()["paths"]
        http.release_owner("shop.Orders")
        assert (await c.get("/orders")).status_code == 404
        assert (await c.get("/stock")).json() == "second"
        paths = (await c.get("/openapi.json")).json()["paths"]
    assert "/orders" not in paths and "/stock" in paths
    assert [e["owner"] for e in http.get_endpoints()] == ["shop.Stock"]


async def test_openapi_documents_models_tags_status_and_the_error_envelope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)

    async def create(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Create an order.

        Longer description.
        """
        return {"order_id": 1}

    http.add_endpoint(
        "/shops/{shop_id:int}/orders",
        "POST",
        create,
        request_model=Order,
        response_model=Receipt,
        tags=["shop"],
        status_code=201,
    )
    async with client(http) as c:
        docs = await c.get("/docs")
        schema = (await c.get("/openapi.json")).json()
    assert docs.status_code == 200
    operation = schema["paths"]["/shops/{shop_id}/orders"]["post"]
    assert operation["tags"] == ["shop"]
    assert operation["summary"] == "Create an order."
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Order"
    }
    assert operation["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Receipt"
    }
    assert operation["parameters"][0]["name"] == "shop_id"
    assert operation["parameters"][0]["schema"]["type"] == "integer"
    assert "ErrorEnvelope" in str(operation["responses"]["422"])
    assert {"Order", "Receipt", "ErrorEnvelope"} <= set(schema["components"]["schemas"])


async def test_openapi_marks_event_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def events(data: dict[str, Any], context: dict[str, Any]) -> Any:
        yield {"data": "x"}

    http.add_sse_endpoint("/events", events, tags=["live"])
    async with client(http) as c:
        schema = (await c.get("/openapi.json")).json()
    operation = schema["paths"]["/events"]["get"]
    assert operation["tags"] == ["live"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"path": "orders"}, ValueError),
        ({"method": "FETCH"}, ValueError),
        ({"handler": "not callable"}, TypeError),
        ({"request_model": dict}, TypeError),
        ({"status_code": 99}, ValueError),
    ],
)
async def test_bad_registrations_are_refused(
    monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any], error: type[Exception]
) -> None:
    http = await make_http(monkeypatch)
    call: dict[str, Any] = {"path": "/x", "method": "GET", "handler": first, **arguments}
    with pytest.raises(error):
        http.add_endpoint(call.pop("path"), call.pop("method"), call.pop("handler"), **call)
