"""Every failure is answered with the same envelope, the right status, and no internals."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi import HTTPException

from core.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    RequestError,
    ServiceUnavailableError,
    ToolUnavailableError,
    UnauthorizedError,
)
from tests.tools.http.http_kit import client, make_http


def assert_envelope(body: dict[str, Any], kind: str, request_id: str) -> dict[str, Any]:
    error = body["error"]
    assert error["kind"] == kind
    assert error["request_id"] == request_id
    assert isinstance(error["message"], str) and error["message"]
    return dict(error)


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (NotFoundError("no order 7"), 404, "not_found"),
        (ConflictError("order 7 exists"), 409, "conflict"),
        (ForbiddenError("not yours"), 403, "forbidden"),
        (UnauthorizedError("log in"), 401, "unauthorized"),
        (InvalidInputError("quantity must be positive"), 422, "invalid"),
        (ServiceUnavailableError("try later"), 503, "unavailable"),
        (RequestError("bad"), 400, "bad_request"),
    ],
)
async def test_request_errors_map_to_their_status_and_kind(
    monkeypatch: pytest.MonkeyPatch, error: RequestError, status: int, kind: str
) -> None:
    http = await make_http(monkeypatch)

    async def handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise error

    http.add_endpoint("/x", "GET", handler)
    async with client(http) as c:
        response = await c.get("/x", headers={"X-Request-ID": "r-1"})
    assert response.status_code == status
    assert assert_envelope(response.json(), kind, "r-1")["message"] == str(error)


async def test_a_request_error_may_carry_fields_and_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise InvalidInputError(
            "bad sku",
            fields=[{"field": "sku", "location": "body", "message": "unknown"}],
            headers={"X-Hint": "see docs"},
        )

    http.add_endpoint("/x", "POST", handler)
    async with client(http) as c:
        response = await c.post("/x")
    assert response.status_code == 422
    assert response.json()["error"]["fields"] == [{"field": "sku", "location": "body", "message": "unknown"}]
    assert response.headers["x-hint"] == "see docs"


async def test_a_bug_is_a_500_without_internals_logged_with_the_request_id(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http = await make_http(monkeypatch)

    def handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise KeyError("database password is hunter2")

    http.add_endpoint("/boom", "GET", handler)
    with caplog.at_level(logging.ERROR, logger="keel.http"):
        async with client(http) as c:
            response = await c.get("/boom", headers={"X-Request-ID": "bug-1"})
    assert response.status_code == 500
    error = assert_envelope(response.json(), "internal", "bug-1")
    assert "hunter2" not in response.text and "KeyError" not in response.text
    assert error["message"] == "internal server error; quote the request id when reporting it"
    [record] = [r for r in caplog.records if r.name == "keel.http"]
    assert "bug-1" in record.getMessage()
    assert record.exc_info is not None and "hunter2" in str(record.exc_info[1])


async def test_fastapi_http_exception_keeps_its_status_and_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise HTTPException(status_code=418, detail="I am a teapot", headers={"X-Tea": "earl grey"})

    http.add_endpoint("/tea", "GET", handler)
    async with client(http) as c:
        response = await c.get("/tea", headers={"X-Request-ID": "t-1"})
    assert response.status_code == 418
    assert assert_envelope(response.json(), "bad_request", "t-1")["message"] == "I am a teapot"
    assert response.headers["x-tea"] == "earl grey"


async def test_unknown_route_is_a_404_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    async with client(http) as c:
        response = await c.get("/nowhere", headers={"X-Request-ID": "n-1"})
    assert response.status_code == 404
    assert assert_envelope(response.json(), "not_found", "n-1")["message"] == "no route matches GET /nowhere"
    assert response.headers["x-request-id"] == "n-1"


async def test_wrong_method_is_a_405_envelope_with_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def handler(data: dict[str, Any], context: dict[str, Any]) -> str:
        return "ok"

    http.add_endpoint("/only-get", "GET", handler)
    async with client(http) as c:
        response = await c.delete("/only-get", headers={"X-Request-ID": "m-1"})
    assert response.status_code == 405
    error = assert_envelope(response.json(), "method_not_allowed", "m-1")
    assert error["message"] == "DELETE is not allowed on /only-get; allowed: GET"
    assert response.headers["allow"] == "GET"


async def test_validation_of_a_plain_fastapi_route_uses_the_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    @http.app.get("/native/{number}")
    async def native(number: int) -> int:
        return number

    async with client(http) as c:
        response = await c.get("/native/seven", headers={"X-Request-ID": "v-1"})
    assert response.status_code == 422
    error = assert_envelope(response.json(), "invalid", "v-1")
    assert error["fields"][0]["field"] == "number"
    assert error["fields"][0]["location"] == "path"


async def test_a_bug_outside_any_keel_route_is_still_the_500_envelope(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http = await make_http(monkeypatch)

    @http.app.get("/native-bug")
    async def native_bug() -> None:
        raise RuntimeError("internal detail")

    with caplog.at_level(logging.ERROR, logger="keel.http"):
        async with client(http) as c:
            response = await c.get("/native-bug", headers={"X-Request-ID": "nb-1"})
    assert response.status_code == 500
    assert_envelope(response.json(), "internal", "nb-1")
    assert "internal detail" not in response.text
    assert response.headers["x-request-id"] == "nb-1"
    assert len([r for r in caplog.records if "nb-1" in r.getMessage()]) == 1  # logged once


async def test_a_path_parameter_that_does_not_fit_its_type_is_a_422(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http = await make_http(monkeypatch)

    async def echo(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return data

    http.add_endpoint("/n/{n:int}", "GET", echo)
    async with client(http) as c:
        with caplog.at_level(logging.ERROR):
            huge = await c.get("/n/" + "9" * 5000)
        fine = await c.get("/n/12")
    assert huge.status_code == 422
    error = huge.json()["error"]
    assert error["kind"] == "invalid"
    assert [f["field"] for f in error["fields"]] == ["n"]
    assert error["fields"][0]["location"] == "path"
    assert error["request_id"] == huge.headers["x-request-id"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "not logged as a bug"
    assert fine.json() == {"n": 12}


class _DatabaseDown(ToolUnavailableError):
    pass


@pytest.mark.parametrize("sync", [False, True])
async def test_an_outage_in_any_handler_is_a_503_with_retry_after(
    monkeypatch: pytest.MonkeyPatch, sync: bool
) -> None:
    http = await make_http(monkeypatch)

    async def handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise _DatabaseDown("could not connect to 10.0.0.7:5432")

    def sync_handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        raise _DatabaseDown("could not connect to 10.0.0.7:5432")

    http.add_endpoint("/orders", "POST", sync_handler if sync else handler)
    async with client(http) as c:
        response = await c.post("/orders", json={}, headers={"X-Request-ID": "r-9"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    error = assert_envelope(response.json(), "unavailable", "r-9")
    assert "_DatabaseDown" in error["message"] and "10.0.0.7" not in error["message"]


async def test_an_outage_may_say_when_to_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def handler(data: dict[str, Any], context: dict[str, Any]) -> None:
        error = ToolUnavailableError("rate limited upstream")
        error.retry_after = 2.2  # type: ignore[attr-defined]
        raise error

    http.add_endpoint("/x", "GET", handler)
    async with client(http) as c:
        response = await c.get("/x")
    assert (response.status_code, response.headers["retry-after"]) == (503, "3")


async def test_an_outage_before_a_stream_opens_is_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)

    async def opening(data: dict[str, Any], context: dict[str, Any]) -> Any:
        raise ToolUnavailableError("redis down")

    http.add_sse_endpoint("/feed", opening)
    async with client(http) as c:
        response = await c.get("/feed")
    assert (response.status_code, response.headers["retry-after"]) == (503, "5")
    assert response.json()["error"]["kind"] == "unavailable"
