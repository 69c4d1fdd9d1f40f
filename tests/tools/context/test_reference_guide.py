"""The reference's guide works as written: its skeleton boots and answers, its errors table is what
the HTTP tool really answers. Code and tables are read from the committed docs/plugin-api.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kit import PROJECT, make_root, serving, until, write

REFERENCE = PROJECT / "docs" / "plugin-api.md"
SNIPPET = re.compile(r"^`(?P<path>[^`\n]+)`:\n\n```(?P<language>\w+)\n(?P<code>.*?)^```$", re.S | re.M)


def snippets() -> dict[str, str]:
    """Every ``path``: code block of the reference, by path."""
    found = {m["path"]: m["code"] for m in SNIPPET.finditer(REFERENCE.read_text(encoding="utf-8"))}
    assert found, "the reference shows files to drop in"
    return found


def skeleton() -> dict[str, str]:
    files = {path: code for path, code in snippets().items() if "/notes" in path and "tests/" not in path}
    assert sorted(files) == [
        "domains/notes/models/note.py",
        "domains/notes/plugins/note_log.py",
        "domains/notes/plugins/notes.py",
        "migrations/notes/001_create_notes.sql",
    ]
    return files


@pytest.fixture
def notes_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///:memory:")
    monkeypatch.delenv("EVENT_BUS_URL", raising=False)
    root = make_root(tmp_path, tools=("http", "db", "event_bus", "logger"))
    for path, code in skeleton().items():
        write(root, path, code)
    return root


async def test_the_skeleton_boots_as_written_and_answers_as_the_guide_says(notes_root: Path) -> None:
    async with serving(notes_root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        plugins = kernel.registry.get_system_dump()["plugins"]
        assert {p: plugins[p]["status"] for p in ("notes.Notes", "notes.NoteLog")} == {
            "notes.Notes": "READY",
            "notes.NoteLog": "READY",
        }
        logged: list[str] = []
        kernel.container.get("logger").add_sink(lambda level, message, *rest: logged.append(message))

        created = await client.post("/notes", content=b'{"title": "milk"}')  # as curl -d sends it
        assert created.status_code == 201, created.text
        note = created.json()
        assert set(note) == {"id", "title", "body", "created_at"}
        assert (note["title"], note["body"]) == ("milk", "")

        read = await client.get(f"/notes/{note['id']}")
        assert (read.status_code, read.json()) == (200, note)

        missing = await client.get("/notes/nope")
        assert missing.status_code == 404
        assert missing.json()["error"] == {
            "kind": "not_found",
            "message": "no note nope",
            "request_id": missing.headers["x-request-id"],
        }
        invalid = await client.post("/notes", json={"title": ""})
        assert invalid.status_code == 422
        assert [f["field"] for f in invalid.json()["error"]["fields"]] == ["title"]

        await until(lambda: f"note {note['id']} created: milk" in logged, "the subscriber logged the event")


CONTEXT_PLUGIN = """
    from typing import Any

    from pydantic import BaseModel

    from core import BasePlugin


    class Body(BaseModel):
        count: int


    class Context(BasePlugin):
        def __init__(self, http: Any) -> None:
            self.http = http

        def on_boot(self) -> None:
            self.http.add_endpoint("/context/{item:int}", "POST", self.show, request_model=Body)

        async def show(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
            return {"data": data, "keys": sorted(context), "model": type(context["model"]).__name__}
"""


def context_keys() -> list[str]:
    text = REFERENCE.read_text(encoding="utf-8")
    start = text.index("| key | value |")
    table = text[start : text.index("\n\n", start)]
    return sorted(
        key for cell in re.findall(r"^\| ([^|]+) \|", table, re.M) for key in re.findall(r"`(\w+)`", cell)
    )


async def test_data_and_context_hold_what_the_guide_says(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http",))
    write(root, "domains/probe/plugins/context.py", CONTEXT_PLUGIN)
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        answer = (await client.post("/context/7?tag=x", json={"count": 2})).json()
    assert answer["data"] == {"item": 7, "tag": "x", "count": 2}, "one flat dict: path, query, body"
    assert answer["model"] == "Body"
    assert answer["keys"] == context_keys()


# -- the errors table -----------------------------------------------------------------------------

ERRORS_PLUGIN = """
    from typing import Any

    from pydantic import BaseModel

    from core import BasePlugin, ToolUnavailableError, errors


    class Body(BaseModel):
        count: int


    class Raiser(BasePlugin):
        def __init__(self, http: Any) -> None:
            self.http = http

        def on_boot(self) -> None:
            self.http.add_endpoint("/raise/{name}", "GET", self.raise_named)
            self.http.add_endpoint("/raise/{name}/after/{seconds:int}", "GET", self.raise_named)
            self.http.add_endpoint("/model", "POST", self.echo, request_model=Body)
            self.http.add_endpoint("/json", "POST", self.echo)

        async def raise_named(self, data: dict[str, Any], context: dict[str, Any]) -> None:
            name = data["name"]
            if name == "ToolUnavailableError":
                raise ToolUnavailableError("db at 10.0.0.7 refused the connection")
            if name == "bug":
                raise RuntimeError("a bug")
            if "seconds" in data:
                raise getattr(errors, name)(f"raised {name}", retry_after=data["seconds"])
            raise getattr(errors, name)(f"raised {name}")

        async def echo(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
            return data
"""

ROW = re.compile(r"^\| (?P<raised>.+?) \| (?P<status>\d{3}) \| `(?P<kind>\w+)` \| (?P<note>.*) \|$", re.M)


def error_table() -> list[dict[str, str]]:
    text = REFERENCE.read_text(encoding="utf-8")
    start = text.index("| handler raises | status | `error.kind` | note |")
    table = text[start : text.index("\n\n", start)]
    rows = [m.groupdict() for m in ROW.finditer(table)]
    assert len(rows) == table.count("\n") - 1, "every row of the table parsed"
    return rows


async def answer_to(client: httpx.AsyncClient, raised: str) -> httpx.Response:
    """Make the handler do what one row of the table says."""
    request_error = re.fullmatch(r"`(\w+)\((message.*)\)`", raised)
    if request_error and "retry_after" in request_error[2]:
        return await client.get(f"/raise/{request_error[1]}/after/7")
    if request_error:
        return await client.get(f"/raise/{request_error[1]}")
    if raised.startswith("`ToolUnavailableError`"):
        return await client.get("/raise/ToolUnavailableError")
    if raised.startswith("a body that fails `request_model`"):
        return await client.post("/model", json={"count": "many"})
    if raised == "a body that is not JSON":
        return await client.post("/json", content=b"{not json")
    if raised == "any other exception (a bug)":
        return await client.get("/raise/bug")
    raise AssertionError(f"the test does not know how to provoke the row {raised!r}: add it")


async def test_every_row_of_the_errors_table_is_what_a_real_request_answers(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http",))
    write(root, "domains/probe/plugins/raiser.py", ERRORS_PLUGIN)
    rows = error_table()
    assert {"`NotFoundError(message)`", "`TooManyRequestsError(message, *, retry_after=None)`"} <= {
        r["raised"] for r in rows
    }
    seen: list[tuple[str, int, str]] = []
    async with serving(root) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:
        for row in rows:
            response = await answer_to(client, row["raised"])
            error: dict[str, Any] = response.json()["error"]
            seen.append((row["raised"], response.status_code, error["kind"]))
            if "retry_after" in row["raised"]:
                assert response.headers["retry-after"] == "7", row
            if "Retry-After" in row["note"]:
                assert "retry-after" in response.headers, row
            assert error["request_id"] == response.headers["x-request-id"], row
            if "`fields`" in row["note"]:
                assert [f["field"] for f in error["fields"]] == ["count"], row
            if row["raised"].startswith(("`ToolUnavailableError`", "any other")):
                assert "10.0.0.7" not in response.text and "a bug" not in response.text, row
    assert seen == [(r["raised"], int(r["status"]), r["kind"]) for r in rows]
