"""uvicorn's header checks answered from memory: the same answers, and a bad header still refused."""

from __future__ import annotations

import asyncio
import importlib.util
import re
from typing import Any

import httpx
import pytest
from uvicorn.protocols.http import httptools_impl

from tests.tools.http.http_kit import WAIT, make_http, running
from tools.http import header_checks
from tools.http.header_checks import MEMO_SIZE, MemoPattern, is_memo


def uvicorns(name: str) -> re.Pattern[bytes]:
    """uvicorn's own expression, whether or not a memo stands in front of it by now."""
    current = getattr(httptools_impl, name)
    pattern = current.pattern if is_memo(current) else current
    assert isinstance(pattern, re.Pattern)
    return pattern


NAME = uvicorns("HEADER_RE")
VALUE = uvicorns("HEADER_VALUE_RE")

SAMPLES = [
    b"",
    b"x-request-id",
    b"0123456789abcdef0123456789abcdef",
    b"application/json",
    b"Mon, 07 Dec 2026 17:00:00 GMT",
    b"a b",
    b"tab\there",
    b"line\r\nbreak",
    b"caf\xc3\xa9",
    *(bytes([byte]) for byte in range(256)),
    *(b"ok" + bytes([byte]) + b"ok" for byte in range(256)),
]


@pytest.mark.parametrize("pattern", [NAME, VALUE], ids=["name", "value"])
def test_the_memo_answers_what_the_expression_answers_first_and_second_time(
    pattern: re.Pattern[bytes],
) -> None:
    memo = MemoPattern(pattern)
    for _ in range(2):  # the second pass is answered from memory
        for sample in SAMPLES:
            assert bool(memo.search(sample)) == bool(pattern.search(sample)), sample


def test_a_full_memo_starts_again_and_stays_right() -> None:
    memo = MemoPattern(VALUE)
    for n in range(3 * MEMO_SIZE):
        assert memo.search(f"v-{n}".encode()) is None
    assert memo.search(b"bad\x00") and memo.search(b"bad\x00")


def test_install_puts_the_memo_in_uvicorns_place_once() -> None:
    assert header_checks.install() is True
    first = httptools_impl.HEADER_VALUE_RE
    assert is_memo(first) and is_memo(httptools_impl.HEADER_RE)
    assert header_checks.install() is True
    assert httptools_impl.HEADER_VALUE_RE is first  # not a memo in front of a memo


def test_a_memo_of_another_copy_of_the_module_counts_as_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httptools_impl, "HEADER_RE", NAME)
    monkeypatch.setattr(httptools_impl, "HEADER_VALUE_RE", VALUE)
    spec = importlib.util.spec_from_file_location("another_root_header_checks", header_checks.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)  # what booting a second project root does to a tool's modules
    assert copy.install() is True
    theirs = httptools_impl.HEADER_VALUE_RE
    assert not isinstance(theirs, MemoPattern) and is_memo(theirs)
    assert header_checks.install() is True
    assert httptools_impl.HEADER_VALUE_RE is theirs


async def test_a_served_response_with_a_control_character_in_a_header_is_still_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    http = await make_http(monkeypatch, PORT="0")

    async def bad(data: dict[str, Any], context: dict[str, Any]) -> Any:
        return http.json_response({"ok": True}, headers={"X-Note": "split\x01here"})

    async def good(data: dict[str, Any], context: dict[str, Any]) -> dict[str, bool]:
        return {"ok": True}

    http.add_endpoint("/bad", "GET", bad)
    http.add_endpoint("/good", "GET", good)
    async with running(http) as (url, _, _):
        assert is_memo(httptools_impl.HEADER_VALUE_RE)  # the server installed it
        host, port = url.removeprefix("http://").rsplit(":", 1)
        for _ in range(2):  # the second time the value is remembered as bad
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"GET /bad HTTP/1.1\r\nHost: keel\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), WAIT)  # uvicorn closes without a head
            writer.close()
            await writer.wait_closed()
            assert b"split" not in answer and not answer.startswith(b"HTTP/1.1 200")
            async with httpx.AsyncClient(base_url=url) as client:
                response = await client.get("/good")
            assert response.status_code == 200 and response.json() == {"ok": True}
