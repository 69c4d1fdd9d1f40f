"""What a handler receives (``data``, ``context``) and how its return value becomes the response."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from core.context import current_event_id_var, current_identity_var
from tests.tools.http.http_kit import client, make_http


class Item(BaseModel):
    name: str
    quantity: int = 1


class PublicItem(BaseModel):
    name: str


class Recorder:
    """A plugin-like object whose bound methods have a plugin identity."""

    keel_identity = "demo.Recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.seen: dict[str, Any] = {}

    async def handle(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((data, context))
        self.seen.update(identity=current_identity_var.get(), event_id=current_event_id_var.get())
        return {"data": data}

    def handle_sync(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        self.seen.update(
            thread=threading.get_ident(),
            identity=current_identity_var.get(),
            event_id=current_event_id_var.get(),
        )
        return {"data": data}


async def test_data_merges_path_query_and_body(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/orders/{order_id:int}/lines", "POST", recorder.handle)
    async with client(http) as c:
        response = await c.post("/orders/7/lines?tag=a&tag=b&note=", json={"sku": "x-1", "count": 2})
    assert response.status_code == 200
    assert response.json() == {
        "data": {"order_id": 7, "tag": ["a", "b"], "note": "", "sku": "x-1", "count": 2}
    }


async def test_context_describes_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/things/{name}", "GET", recorder.handle)
    async with client(http) as c:
        response = await c.get("/things/a?x=1", headers={"X-Custom": "Yes", "X-Request-ID": "req-1"})
    assert response.status_code == 200
    _, context = recorder.calls[0]
    assert context["request_id"] == "req-1"
    assert context["method"] == "GET"
    assert context["path"] == "/things/a"
    assert context["headers"]["x-custom"] == "Yes"
    assert context["client"] == "127.0.0.1"
    assert context["identity"] is None
    assert context["query"] == {"x": "1"}


async def test_async_handler_runs_with_its_identity_and_the_request_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/a", "GET", recorder.handle)
    async with client(http) as c:
        response = await c.get("/a", headers={"X-Request-ID": "abc"})
    assert response.status_code == 200
    assert recorder.seen == {"identity": "demo.Recorder.handle", "event_id": "abc"}
    assert current_identity_var.get() is None  # reset after the request


async def test_sync_handler_runs_in_a_worker_thread_with_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/s", "GET", recorder.handle_sync)
    async with client(http) as c:
        response = await c.get("/s", headers={"X-Request-ID": "sync-1"})
    assert response.status_code == 200
    assert recorder.seen["thread"] != threading.get_ident()
    assert recorder.seen["identity"] == "demo.Recorder.handle_sync"
    assert recorder.seen["event_id"] == "sync-1"


async def test_a_blocking_sync_handler_does_not_block_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    entered, release = threading.Event(), threading.Event()

    def blocking(data: dict[str, Any], context: dict[str, Any]) -> str:
        entered.set()
        release.wait(10)
        return "done"

    async def quick(data: dict[str, Any], context: dict[str, Any]) -> str:
        return "quick"

    http.add_endpoint("/block", "GET", blocking)
    http.add_endpoint("/quick", "GET", quick)
    async with client(http) as c:
        slow = asyncio.create_task(c.get("/block"))
        assert await asyncio.to_thread(entered.wait, 10)  # /block is now blocking its thread
        assert (await c.get("/quick")).json() == "quick"  # answered while /block is still blocked
        assert not slow.done()
        release.set()
        assert (await slow).json() == "done"


@pytest.mark.parametrize(
    ("url", "body", "field", "location"),
    [
        ("/items/1?item_id=2", None, "item_id", "query"),
        ("/items/1", {"item_id": 2}, "item_id", "body"),
        ("/items/1?color=red", {"color": "blue"}, "color", "body"),
    ],
)
async def test_a_key_given_twice_is_a_422_and_path_params_are_never_overridden(
    monkeypatch: pytest.MonkeyPatch, url: str, body: dict[str, Any] | None, field: str, location: str
) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/items/{item_id:int}", "PUT", recorder.handle)
    async with client(http) as c:
        response = await c.put(url, json=body) if body is not None else await c.put(url)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["kind"] == "invalid"
    assert field in error["message"]
    assert error["fields"][0]["field"] == field
    assert error["fields"][0]["location"] == location
    assert recorder.calls == []


async def test_request_model_validates_the_body_and_data_is_its_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/items", "POST", recorder.handle, request_model=Item, status_code=201)
    async with client(http) as c:
        response = await c.post("/items", json={"name": "bolt"})
    assert response.status_code == 201
    assert response.json() == {"data": {"name": "bolt", "quantity": 1}}
    _, context = recorder.calls[0]
    assert context["model"] == Item(name="bolt", quantity=1)


async def test_request_model_failure_is_a_422_naming_each_field(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/items", "POST", recorder.handle, request_model=Item)
    async with client(http) as c:
        response = await c.post("/items", json={"quantity": "many"})
        missing_body = await c.post("/items")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["kind"] == "invalid"
    assert {f["field"] for f in error["fields"]} == {"name", "quantity"}
    assert "name" in error["message"] and "quantity" in error["message"]
    assert missing_body.status_code == 422  # an absent body validates as {}
    assert [f["field"] for f in missing_body.json()["error"]["fields"]] == ["name"]
    assert recorder.calls == []


@pytest.mark.parametrize("model", [None, Item])
async def test_malformed_json_is_a_400_never_ignored(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/items", "POST", recorder.handle, request_model=model)
    async with client(http) as c:
        response = await c.post("/items", content=b'{"name": ', headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["kind"] == "bad_request"
    assert "not valid JSON" in error["message"]
    assert recorder.calls == []


async def test_a_non_object_body_without_a_model_is_a_422(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/items", "POST", recorder.handle)
    async with client(http) as c:
        response = await c.post("/items", json=[1, 2])
    assert response.status_code == 422
    assert "must be an object" in response.json()["error"]["message"]


async def test_the_body_is_json_whatever_the_content_type(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    recorder = Recorder()
    http.add_endpoint("/items", "POST", recorder.handle)
    async with client(http) as c:
        response = await c.post(
            "/items", content=b'{"a": 1}', headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        empty = await c.post("/items", content=b"")
    assert response.json() == {"data": {"a": 1}}
    assert empty.json() == {"data": {}}


async def test_a_body_over_the_limit_is_a_413(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch, HTTP_MAX_BODY_BYTES="16")
    recorder = Recorder()
    http.add_endpoint("/items", "POST", recorder.handle)
    async with client(http) as c:
        response = await c.post("/items", json={"text": "x" * 100})
    assert response.status_code == 413
    assert "HTTP_MAX_BODY_BYTES" in response.json()["error"]["message"]


async def test_return_values_are_serialised_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    ident = uuid.UUID(int=1)
    values: dict[str, Any] = {
        "/list": [1, "a", None],
        "/scalar": 42,
        "/model": Item(name="x"),
        "/rich": {"at": moment, "id": ident},
    }
    for path, value in values.items():

        async def handler(data: dict[str, Any], context: dict[str, Any], value: Any = value) -> Any:
            return value

        http.add_endpoint(path, "GET", handler)
    async with client(http) as c:
        assert (await c.get("/list")).json() == [1, "a", None]
        assert (await c.get("/scalar")).json() == 42
        assert (await c.get("/model")).json() == {"name": "x", "quantity": 1}
        rich = await c.get("/rich")
    assert rich.json() == {"at": "2025-01-02T03:04:05Z", "id": str(ident)}
    assert rich.headers["content-type"] == "application/json"


async def test_none_is_an_empty_204_or_the_declared_status(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def nothing(data: dict[str, Any], context: dict[str, Any]) -> None:
        return None

    http.add_endpoint("/gone", "DELETE", nothing)
    http.add_endpoint("/accepted", "POST", nothing, status_code=202)
    async with client(http) as c:
        deleted = await c.delete("/gone")
        accepted = await c.post("/accepted")
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert (accepted.status_code, accepted.content) == (202, b"")


async def test_response_model_validates_and_filters_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def leaky(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"name": "x", "password_hash": "secret"}

    async def wrong(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"nom": "x"}

    http.add_endpoint("/user", "GET", leaky, response_model=PublicItem)
    http.add_endpoint("/wrong", "GET", wrong, response_model=PublicItem)
    async with client(http) as c:
        assert (await c.get("/user")).json() == {"name": "x"}
        broken = await c.get("/wrong")
    assert broken.status_code == 500  # the handler broke its own contract: a server error
    assert broken.json()["error"]["kind"] == "internal"


async def test_json_response_sets_another_status_and_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def busy(data: dict[str, Any], context: dict[str, Any]) -> Any:
        return http.json_response({"busy": True}, status_code=503, headers={"Retry-After": "5"})

    http.add_endpoint("/busy", "GET", busy)
    async with client(http) as c:
        response = await c.get("/busy")
    assert response.status_code == 503
    assert response.json() == {"busy": True}
    assert response.headers["retry-after"] == "5"
    assert response.headers["x-request-id"]
