"""The OpenAPI document says what the service does: security, event streams, query parameters."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from tests.tools.http.http_kit import client, make_http


class Page(BaseModel):
    limit: int = Field(default=50, ge=1, le=500, description="how many at most")
    agent: str | None = None


async def handler(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    return data


async def stream(data: dict[str, Any], context: dict[str, Any]) -> Any:
    yield {"data": "x"}


async def test_protected_operations_declare_the_bearer_scheme_once_a_validator_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/open", "GET", handler)
    http.add_endpoint("/mine", "GET", handler, auth=True)
    http.add_endpoint("/admin", "GET", handler, auth="admin")
    off = http.app.openapi()
    assert "securitySchemes" not in off.get("components", {})
    assert "security" not in off["paths"]["/admin"]["get"], "open while no validator is installed"
    assert "503" in off["paths"]["/mine"]["get"]["responses"]
    http.set_auth_validator(lambda token: {"sub": "x"})
    on = http.app.openapi()
    assert on["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "a token from POST /users/login",
    }
    assert on["paths"]["/mine"]["get"]["security"] == [{"bearerAuth": []}]
    assert on["paths"]["/admin"]["get"]["security"] == [{"bearerAuth": []}]
    assert {"401", "403"} <= set(on["paths"]["/admin"]["get"]["responses"])
    assert "security" not in on["paths"]["/open"]["get"]


async def test_event_streams_document_json_errors_and_the_event_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch)
    http.add_sse_endpoint("/events", stream, auth=True)
    operation = http.app.openapi()["paths"]["/events"]["get"]
    ok = operation["responses"]["200"]["content"]
    assert list(ok) == ["text/event-stream"]
    assert ok["text/event-stream"]["x-event-schema"]["required"] == ["data"]
    for status, response in operation["responses"].items():
        if status != "200" and "content" in response:
            assert list(response["content"]) == ["application/json"], status
    names = {(p["name"], p["in"]) for p in operation["parameters"]}
    assert {("Last-Event-ID", "header"), ("last_event_id", "query"), ("access_token", "query")} <= names
    async with client(http) as c:
        missing = await c.get("/nowhere")  # what the document promises for errors: JSON
    assert missing.headers["content-type"] == "application/json"


async def test_a_query_model_documents_and_validates_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/runs", "GET", handler, query_model=Page)
    parameters = {p["name"]: p for p in http.app.openapi()["paths"]["/runs"]["get"]["parameters"]}
    assert parameters["limit"]["schema"]["maximum"] == 500
    assert parameters["limit"]["description"] == "how many at most"
    assert parameters["limit"]["required"] is False
    assert "agent" in parameters
    async with client(http) as c:
        assert (await c.get("/runs", params={"limit": "7", "other": "x"})).json() == {
            "limit": 7,
            "agent": None,
        }
        bad = await c.get("/runs", params={"limit": "9" * 5000})
        assert bad.status_code == 422
        assert bad.json()["error"]["fields"][0]["location"] == "query"
        assert (await c.get("/runs", params={"limit": "0"})).status_code == 422
    with pytest.raises(TypeError, match="query_model"):
        http.add_endpoint("/x", "GET", handler, query_model=dict)  # type: ignore[arg-type]


async def test_a_json_null_body_is_no_body_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/items", "POST", handler)
    body = http.app.openapi()["paths"]["/items"]["post"]["requestBody"]["content"]["application/json"]
    assert {"type": "null"} in body["schema"]["anyOf"]
    async with client(http) as c:
        response = await c.post("/items", content=b"null", headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.json() == {}
