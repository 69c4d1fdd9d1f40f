"""X-Request-ID: kept when the caller's is sane, generated otherwise, echoed on every response."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from tests.tools.http.http_kit import client, make_http
from tools.http.request_id import RequestIdMiddleware, accepted_request_id, new_request_id


async def echo(data: dict[str, Any], context: dict[str, Any]) -> str:
    return str(context["request_id"])


async def test_a_caller_id_is_kept_and_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/id", "GET", echo)
    async with client(http) as c:
        response = await c.get("/id", headers={"X-Request-ID": "gateway-42/a"})
    assert response.headers["x-request-id"] == "gateway-42/a"
    assert response.json() == "gateway-42/a"


async def test_an_id_is_generated_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/id", "GET", echo)
    async with client(http) as c:
        first = await c.get("/id")
        second = await c.get("/id")
    assert re.fullmatch(r"[0-9a-f]{32}", first.headers["x-request-id"])
    assert first.json() == first.headers["x-request-id"]
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize("bad", ["x" * 129, "has space", "tab\there", "caf\u00e9"])
async def test_an_unacceptable_id_is_replaced(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    http = await make_http(monkeypatch)
    http.add_endpoint("/id", "GET", echo)
    async with client(http) as c:
        response = await c.get("/id", headers=[(b"X-Request-ID", bad.encode("latin-1"))])
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
    assert response.json() == response.headers["x-request-id"]


def test_acceptable_ids() -> None:
    assert accepted_request_id(b"a" * 128) == "a" * 128
    assert accepted_request_id(b"") is None
    assert accepted_request_id(b"a" * 129) is None
    assert accepted_request_id(b"\x00abc") is None


async def test_error_responses_carry_the_id_too(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    async with client(http) as c:
        response = await c.get("/missing", headers={"X-Request-ID": "lost-1"})
    assert response.status_code == 404
    assert response.headers["x-request-id"] == "lost-1"
    assert response.json()["error"]["request_id"] == "lost-1"


def test_generated_ids_are_uuid4_hex() -> None:
    ids = [new_request_id() for _ in range(600)]  # more than one batch
    assert len(set(ids)) == len(ids)
    for value in ids:
        parsed = uuid.UUID(hex=value)
        assert parsed.hex == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122


async def cancelled(scope: Scope, receive: Receive, send: Send) -> None:
    raise asyncio.CancelledError


async def run(app: RequestIdMiddleware) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/x", "headers": [(b"x-request-id", b"r-1")]}
    await app(scope, receive, send)
    return sent


async def test_a_request_cut_off_by_the_shutdown_is_a_503() -> None:
    sent = await run(RequestIdMiddleware(cancelled, stopping=lambda: True))
    assert sent[0]["status"] == 503
    assert (b"retry-after", b"1") in sent[0]["headers"]
    assert b'"request_id":"r-1"' in sent[1]["body"]


@pytest.mark.parametrize("stopping", [None, lambda: False])
async def test_another_cancellation_goes_on(stopping: Any) -> None:
    with pytest.raises(asyncio.CancelledError):
        await run(RequestIdMiddleware(cancelled, stopping=stopping))
