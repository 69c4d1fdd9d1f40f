"""?access_token=: it still authenticates event streams, and no log line, trace or context shows it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.tools.http.http_kit import client, make_http, running
from tools.http.http_tool import HttpTool
from tools.http.query_token import ACCESS_TOKEN_KEY, lift_access_token

SECRET = "s3cret-Tok.en"


@pytest.mark.parametrize(
    ("query", "rewritten", "token"),
    [
        (b"a=1&access_token=tok&b=%20x+y", b"a=1&access_token=REDACTED&b=%20x+y", "tok"),
        (b"access_token=tok", b"access_token=REDACTED", "tok"),
        (b"access%5Ftoken=tok&z", b"access%5Ftoken=REDACTED&z", "tok"),
        (b"access_token=a%2Bb+c%C3%A9", b"access_token=REDACTED", "a+b c\u00e9"),
        (b"access_token=one&x=1&access_token=two", b"access_token=REDACTED&x=1&access_token=REDACTED", None),
        (b"access_token=", b"access_token=REDACTED", None),
        (b"access_token", b"access_token=REDACTED", None),
    ],
)
def test_the_token_is_lifted_and_the_query_redacted(
    query: bytes, rewritten: bytes, token: str | None
) -> None:
    scope: dict[str, Any] = {"query_string": query}
    lift_access_token(scope)
    assert scope["query_string"] == rewritten
    assert scope[ACCESS_TOKEN_KEY] == token


@pytest.mark.parametrize(
    "query", [b"a=1&b=2", b"a=%41", b"x=access_token", b"my_access_token=t", b"access_tokens=t", b""]
)
def test_a_query_without_the_parameter_is_left_alone(query: bytes) -> None:
    scope: dict[str, Any] = {"query_string": query}
    lift_access_token(scope)
    assert scope == {"query_string": query}


def test_lifting_twice_keeps_the_token() -> None:
    scope: dict[str, Any] = {"query_string": b"access_token=tok"}
    lift_access_token(scope)
    lift_access_token(scope)
    assert scope == {"query_string": b"access_token=REDACTED", ACCESS_TOKEN_KEY: "tok"}


class Recorder:
    """An authenticated event stream that remembers what it was handed."""

    keel_identity = "demo.Recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def stream(self, data: dict[str, Any], context: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self.seen.append((data, context))
        yield {"data": context["identity"]["sub"]}


async def secured(monkeypatch: pytest.MonkeyPatch, **env: str) -> tuple[HttpTool, Recorder]:
    http = await make_http(monkeypatch, **env)
    tokens = {SECRET: "ann", "header-token": "bob"}
    http.set_auth_validator(lambda token: {"sub": tokens[token]} if token in tokens else None)
    recorder = Recorder()
    http.add_sse_endpoint("/feed", recorder.stream, auth=True)
    return http, recorder


async def test_the_query_token_authenticates_a_stream_whose_context_shows_it_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http, recorder = await secured(monkeypatch)
    async with client(http) as c:
        response = await c.get(f"/feed?topic=a%20b&access_token={SECRET}&n=1&n=2")
        refused = await c.get("/feed?access_token=wrong")
    assert response.text == "data: ann\n\n"
    assert refused.status_code == 401
    data, context = recorder.seen[0]
    assert context["query"] == {"topic": "a b", "access_token": "REDACTED", "n": ["1", "2"]}
    assert data == {"topic": "a b", "n": ["1", "2"]}
    assert SECRET not in repr(context)


async def test_the_header_token_wins_over_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    http, recorder = await secured(monkeypatch)
    async with client(http) as c:
        by_header = await c.get(
            f"/feed?access_token={SECRET}", headers={"Authorization": "Bearer header-token"}
        )
        bad_header = await c.get(f"/feed?access_token={SECRET}", headers={"Authorization": "Bearer nope"})
    assert by_header.text == "data: bob\n\n"
    assert bad_header.status_code == 401
    assert [context["query"] for _, context in recorder.seen] == [{"access_token": "REDACTED"}]


async def test_a_json_endpoint_never_receives_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    http = await make_http(monkeypatch)
    http.set_auth_validator(lambda token: {"sub": "ann"} if token == SECRET else None)

    async def echo(data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        return {"data": data, "query": context["query"], "who": (context["identity"] or {}).get("sub")}

    http.add_endpoint("/echo", "GET", echo)
    http.add_endpoint("/private", "GET", echo, auth=True)
    async with client(http) as c:
        echoed = await c.get(f"/echo?access_token={SECRET}&q=1")
        private = await c.get(f"/private?access_token={SECRET}")
    assert echoed.json() == {
        "data": {"access_token": "REDACTED", "q": "1"},
        "query": {"access_token": "REDACTED", "q": "1"},
        "who": None,
    }
    assert private.status_code == 401  # only event streams take the token from the query


async def test_the_access_log_shows_the_query_redacted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http, _ = await secured(monkeypatch, PORT="0", HTTP_ACCESS_LOG="1")
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        async with running(http) as (url, _, _), httpx.AsyncClient(base_url=url) as c:
            response = await c.get(f"/feed?topic=a%20b&access_token={SECRET}&x=%2F")
    assert response.text == "data: ann\n\n"
    # pytest also hangs its handler on loggers that did not propagate when the test began (as
    # uvicorn.access does after a server ran without the access log): one record may arrive twice.
    [line] = [r.getMessage() for r in dict.fromkeys(caplog.records) if r.name == "uvicorn.access"]
    assert "/feed?topic=a%20b&access_token=REDACTED&x=%2F" in line
    assert SECRET not in "\n".join(r.getMessage() for r in caplog.records)


async def test_the_request_span_shows_the_query_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    http, _ = await secured(monkeypatch)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await http.on_instrument(provider)
    async with client(http) as c:
        response = await c.get(f"/feed?access_token={SECRET}&q=1")
    provider.shutdown()
    assert response.text == "data: ann\n\n"
    attributes = [dict(span.attributes or {}) for span in exporter.get_finished_spans()]
    recorded = repr(attributes)
    assert SECRET not in recorded
    assert "access_token=REDACTED&q=1" in recorded
