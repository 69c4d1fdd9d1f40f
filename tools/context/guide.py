"""The hand-written part of the plugin API reference and AI_CONTEXT.md: how to write a plugin.

Both files show these sections verbatim (:mod:`tools.context.reference` puts them together with
the generated tool reference), so what a person reads and what an assistant is given never
differ. The code in them is tested as written (``tests/tools/context/test_reference_guide.py``):
the skeleton's files are dropped into a project and booted, their routes called; the agent
example is run; the test example is the shape the project's own tests have.

Keep code here runnable (a snippet that cannot boot is worse than none) and as ``ruff format``
writes it: ``make lint`` formats the Python blocks of the generated markdown files too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Snippet:
    path: str
    """Where the file goes in a project (relative to its root)."""
    language: str
    source: str


SKELETON = (
    Snippet(
        "migrations/notes/001_create_notes.sql",
        "sql",
        """\
-- Portable SQL: the same file runs on SQLite and PostgreSQL. Applied once, at boot, before any
-- plugin starts; never edit it after it ran somewhere: write 002_... instead.
CREATE TABLE notes (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
""",
    ),
    Snippet(
        "domains/notes/models/note.py",
        "python",
        '''\
"""What the notes API accepts and answers."""

from pydantic import BaseModel, Field


class NoteIn(BaseModel):
    """A note as a client sends it."""

    title: str = Field(min_length=1, max_length=200)
    body: str = ""


class NoteOut(BaseModel):
    """A note as the API shows it."""

    id: str
    title: str
    body: str
    created_at: str
''',
    ),
    Snippet(
        "domains/notes/plugins/notes.py",
        "python",
        '''\
"""``POST /notes`` and ``GET /notes/{note_id}``; publishes ``note.created``."""

import uuid
from datetime import UTC, datetime
from typing import Any

from core import BasePlugin, NotFoundError
from domains.notes.models.note import NoteIn, NoteOut


class Notes(BasePlugin):
    def __init__(self, http: Any, db: Any, event_bus: Any) -> None:  # tools, injected by name
        self.http = http
        self.db = db
        self.event_bus = event_bus

    def on_boot(self) -> None:
        self.http.add_endpoint(
            "/notes",
            "POST",
            self.create,
            request_model=NoteIn,
            response_model=NoteOut,
            status_code=201,
            tags=["notes"],
        )
        self.http.add_endpoint("/notes/{note_id}", "GET", self.read, response_model=NoteOut, tags=["notes"])

    async def create(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        # data: the validated body as a dict (context["model"] is the NoteIn instance)
        note = {
            "id": uuid.uuid4().hex,
            "title": data["title"],
            "body": data["body"],
            "created_at": datetime.now(UTC).isoformat(),
        }
        await self.db.execute(
            "INSERT INTO notes (id, title, body, created_at) VALUES ($1, $2, $3, $4)",
            [note["id"], note["title"], note["body"], note["created_at"]],
        )
        await self.event_bus.publish("note.created", {"id": note["id"], "title": note["title"]})
        return note

    async def read(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        row = await self.db.query_one("SELECT * FROM notes WHERE id = $1", [data["note_id"]])
        if row is None:
            raise NotFoundError(f"no note {data['note_id']}")  # -> 404, kind "not_found"
        return row
''',
    ),
    Snippet(
        "domains/notes/plugins/note_log.py",
        "python",
        '''\
"""Logs every ``note.created`` event: a subscriber is a plugin like any other."""

from typing import Any

from core import BasePlugin


class NoteLog(BasePlugin):
    def __init__(self, event_bus: Any, logger: Any) -> None:
        self.event_bus = event_bus
        self.logger = logger

    async def on_boot(self) -> None:
        await self.event_bus.subscribe("note.created", self.on_created)

    async def on_created(self, event: Any) -> None:
        # event.payload is what was published (read-only); event.id, event.name, event.parent_id,
        # event.emitter and event.timestamp say which event it is and where it came from
        self.logger.info("note %s created: %s", event.payload["id"], event.payload["title"])
''',
    ),
)

SKELETON_TEST = Snippet(
    "tests/domains/notes/test_notes.py",
    "python",
    '''\
"""The notes API, booted for real on a temporary project root (no mocks, no network but loopback)."""

from pathlib import Path

import httpx
import pytest

from tests.kit import PROJECT, make_root, serving


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DATABASE_URL", "sqlite:///:memory:")
    # the project's own tools and the notes domain, linked into a fresh root
    root = make_root(tmp_path, tools=("http", "db", "event_bus", "logger"), domains=("notes",))
    (root / "migrations").mkdir()
    (root / "migrations" / "notes").symlink_to(PROJECT / "migrations" / "notes")
    return root


async def test_a_note_is_created_then_read_back(root: Path) -> None:
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        created = await client.post("/notes", json={"title": "milk"})
        assert created.status_code == 201
        note = (await client.get(f"/notes/{created.json()['id']}")).json()
        assert note["title"] == "milk"
        missing = await client.get("/notes/nope")
        assert (missing.status_code, missing.json()["error"]["kind"]) == (404, "not_found")
''',
)

AGENT_EXAMPLE = Snippet(
    "domains/agents/plugins/clock_agent.py",
    "python",
    '''\
"""A ReAct agent with one tool, declared as ``clock``: ``POST /agents/clock/runs {"input": "..."}``."""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from core import BasePlugin
from core.agents import Agent, ReActCognition
from core.contracts.types import ToolSchema
from core.runs import catalog_for


class Now:
    """A tool the model may call: the server's time (an agent tool is ``name``, ``schema``, ``run``)."""

    name = "now"
    side_effecting = False  # safe to run again when a run is resumed after a restart
    schema = ToolSchema("now", "The current UTC time, ISO 8601.", {"type": "object", "properties": {}})

    async def run(self, args: Mapping[str, Any], ctx: Any) -> str:
        return datetime.now(UTC).isoformat(timespec="seconds")


def build_agent(model: str) -> Agent:
    return Agent(
        "clock",
        model,
        ReActCognition([Now()], max_iterations=4),
        system="Answer questions about the time. Call now() first.",
    )


class ClockAgent(BasePlugin):
    def __init__(self, llm: Any, container: Any) -> None:
        self.llm = llm
        self.catalog = catalog_for(container)  # the kernel's agent catalog

    def on_boot(self) -> None:
        self.catalog.declare(
            build_agent(self.llm.default_model or "default"), llm=self.llm, description="Tells the time"
        )

    def on_shutdown(self) -> None:
        self.catalog.withdraw("clock")
''',
)

AGENT_TEST = Snippet(
    "tests/domains/agents/test_clock_agent.py",
    "python",
    '''\
"""The clock agent on a scripted model: no key, no network, the same result every run."""

from core.contracts.types import ToolCall
from core.testing import FakeLLM, Turn, make_test_ctx
from domains.agents.plugins.clock_agent import build_agent


async def test_the_agent_reads_the_clock_then_answers() -> None:
    llm = FakeLLM.script([Turn(tool_calls=[ToolCall("call-1", "now", {})]), Turn("It is noon.")])
    result = await build_agent("fake-model").run("What time is it?", make_test_ctx(llm=llm))
    assert result.output == "It is noon."
    assert result.model_calls == 2
''',
)


def snippet(item: Snippet) -> list[str]:
    return [f"`{item.path}`:", "", f"```{item.language}", *item.source.rstrip("\n").splitlines(), "```", ""]


def sections(error_table: list[str], event_fields: list[str]) -> list[str]:
    """The guide, as markdown lines; the two tables are generated from the code by the caller."""
    lines = [
        "## Writing a plugin",
        "",
        "A **plugin** is a class in `domains/<domain>/plugins/<file>.py` that subclasses",
        "`core.BasePlugin`. The kernel finds it at boot (and, under `make run`, when the file appears or",
        "changes), reads its `__init__` parameter names and passes the **tool** of each name (`http`,",
        "`db`, `event_bus`, `llm`, ... — the reference below lists them all). Two names are not tools:",
        "`container` (the kernel's container) and `tasks` (background tasks cancelled when the plugin is",
        "unloaded). A parameter without a default whose tool does not exist leaves the plugin DEAD, with",
        "the reason in `/system/status`; give it a default (`event_bus=None`) to make it optional.",
        "",
        "Hooks: `on_boot()` registers routes and subscriptions; `on_shutdown()` releases what `on_boot`",
        "started. Either may be `def` or `async def` (a plain one runs in a worker thread). A plugin",
        "imports `core` and its own domain, never `tools.*` or another domain: it gets tools injected.",
        "To let mypy check the calls, annotate them with the ports of `core.tool_ports` (`DbPort`,",
        "`HttpPort`, `EventBusPort`, `LoggerPort`, ...) instead of `Any`.",
        "`python main.py check` (`keel check`) reports, before booting, a parameter that names no tool,",
        "a tool coroutine called without `await`, a `tools.*` or other-domain import, and a route outside",
        "the domain's prefix (`/<domain>/`), as `path:line: message`.",
        "`keel doctor` parses every setting and tries every configured backend (`ok|FAIL name: detail`,",
        "with the fix); `keel status [--url URL]` prints a running instance's tools, plugins, load errors",
        "and health from `/system/status`.",
        "",
        "### A complete domain that boots as written",
        "",
        "Four files: a migration, the models, a plugin with two routes that publishes an event, and a",
        "subscriber. Drop them into the project and run `make run`; then",
        '`curl -d \'{"title": "milk"}\' localhost:8000/notes` answers 201 with the note.',
        "",
    ]
    for item in SKELETON:
        lines += snippet(item)
    lines += [
        "### The handler contract",
        "",
        "`http.add_endpoint(path, method, handler, *, request_model=None, response_model=None,",
        "query_model=None, status_code=200, tags=None, auth=False)` serves `handler(data, context)`, a",
        "`def` or an `async def` (a plain one runs in the worker threadpool). What it returns is the",
        "JSON body: a dict, list, scalar, pydantic model or dataclass; `None` is 204. With a",
        "`response_model` the value is validated and filtered through it first (fields it lacks are",
        "dropped). `http.json_response(body, status_code=...)` answers with another status.",
        "",
        "`data` is **one flat dict**: the path parameters (`{note_id}`; `{note_id:int}` converts to an",
        "int), the query parameters and the JSON body. With a `request_model` (a pydantic model",
        "class) the body is validated first (a failure is a 422 naming each field) and `data` holds",
        "`model.model_dump()`; a `query_model` validates the query the same way. A key may come from",
        "one source only.",
        "",
        "`context` holds:",
        "",
        "| key | value |",
        "|---|---|",
        "| `request_id` | the request's id (also the `X-Request-ID` response header) |",
        "| `method`, `path` | as requested |",
        "| `headers` | a dict with lower-case names |",
        "| `query` | the parsed query string |",
        "| `client` | the caller's host, or `None` |",
        "| `identity` | the verified token's claims (`sub`, `roles`, ...), or `None` |",
        "| `model` | the validated `request_model` instance (only with a `request_model`) |",
        "",
        '`auth=False` (anyone), `True` (a valid bearer token), `"admin"` (an admin\'s token), or',
        '`"optional"` (`identity` is set when a valid token is sent). With the auth tool off',
        "(`AUTH_SECRET_KEY` unset), `auth=True` routes answer 503 and admin routes are open (with a",
        "warning at boot when `HOST` is not a loopback address).",
        "",
        "**Errors.** Raise one of `core`'s request errors to answer with a status; every failure has",
        'the body `{"error": {"kind": ..., "message": ..., "request_id": ...}}`:',
        "",
        *error_table,
        "",
        "### Events",
        "",
        "`await event_bus.publish(name, payload)` sends a JSON payload to every subscriber of `name`",
        "and returns the event's id at once. `await event_bus.subscribe(name, handler)` (in `on_boot`)",
        "calls `handler(event)` for each one: the handler receives an **`Event`**, not the payload, so",
        "read `event.payload`:",
        "",
        *event_fields,
        "",
        "A handler that raises is retried (`EVENT_BUS_MAX_ATTEMPTS`, backoff) and then dead-lettered;",
        "the publisher never sees its failure. With a shared Redis bus delivery is at least once, so",
        "make handlers idempotent (the event id is a good key). `await event_bus.request(name, payload)`",
        "waits for the first subscriber that returns a value.",
        "",
        "### Migrations",
        "",
        "SQL files in `migrations/<domain>/NNN_name.sql` (`001_create_notes.sql`). The `db` tool applies",
        "each one once, in its own transaction, at boot before any plugin starts (`python main.py",
        "migrate` applies them without serving). A failing file stops the boot naming the file and line.",
        "Never edit a file that has run: its checksum is recorded and a changed file is a boot error;",
        "write the next number instead. `-- depends: users/001_create_users.sql` orders files across",
        "domains. SQL placeholders are `$1, $2, ...` on both SQLite and PostgreSQL; write portable SQL",
        "(no `SERIAL`, no `AUTOINCREMENT`: make ids in Python, as the skeleton does).",
        "",
        "### Calling the model",
        "",
        "```python",
        'result = await self.llm.complete(system="Be brief.", user="Name a colour.", model="")',
        "text = result.content  # an LLMResult: .content, .usage, .tool_calls, .finish_reason",
        "```",
        "",
        '`model=` is required (keyword-only); `model=""` means the configured `LLM_MODEL`',
        "(`llm.default_model` says which). `chat(messages=[Message(...)], model=...)` takes a",
        "conversation (`core.contracts.types.Message`, `Role`); `stream(...)` is an async iterator of",
        "deltas. Without `LLM_BASE_URL` the tool is OFF; `LLM_PROVIDER=echo` is the offline demo model.",
        "",
        "### Agents",
        "",
        "An agent is a `core.agents.Agent` (a name, a model, a cognition such as `ReActCognition` with",
        "its tools, a system prompt) that a plugin **declares** in the kernel's agent catalog. The one",
        "public way to declare one is `from core.runs import catalog_for`, then",
        "`catalog_for(container).declare(agent, llm=llm)` in a plugin. The runs API serves it:",
        "`POST /agents/clock/runs",
        '{"input": "What time is it?"}` answers 202 with the run id; `GET /agents/runs/{id}` gives its',
        "status and output, `GET /agents/runs/{id}/events` streams its steps.",
        "",
        *snippet(AGENT_EXAMPLE),
        "### Testing a plugin",
        "",
        "Tests boot the real kernel on a temporary project root that links the project's own tools and",
        "your domain (`tests/kit.py`): `make_root(tmp_path, tools=..., domains=...)`, then",
        "`serving(root)` (boots and serves on a free loopback port: `(kernel, base_url)`) or",
        '`booted(root)` (boots without serving; `kernel.container.get("db")` is the tool as plugins',
        "see it). `write(root, path, source)` adds a file, `until(condition, what)` polls with a bound",
        "instead of sleeping. pytest runs `async def` tests directly (`asyncio_mode = auto`).",
        "",
        *snippet(SKELETON_TEST),
        "An agent is tested without a model server: `core.testing.FakeLLM` answers from a script",
        "(`Turn(content, tool_calls)`), `make_test_ctx(llm=...)` builds a real run context around it.",
        "",
        *snippet(AGENT_TEST),
    ]
    return lines
