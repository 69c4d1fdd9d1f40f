"""The project root every scale-out test boots: the real tools and domains, plus a test domain.

Linked from the project: the tools ``http``, ``logger``, ``db``, ``event_bus``, ``store``,
``checkpoint`` and ``system``; the domains ``system`` and ``agents``; ``migrations/agents``.
Written here:

- ``tools/rule_llm``: an ``llm`` tool that answers from the transcript alone (no script to run
  out of), so any process can take a run over from any other: without a tool result in the
  transcript it asks for ``wait_for_gate``, with one it answers ``done``;
- ``domains/scaletest``: plugins that record every delivery (group, event, parent, emitter, pid)
  in the shared database, a handler that always fails, one that waits for a gate file, a
  request/reply answerer, an agent whose one tool waits for a gate file, and ``/scale/*``
  endpoints to publish, ask and read the dead letters. ``SCALE_NAME`` names the process; the
  ``Mailer`` and ``Quoter`` plugins subscribe only in processes not named ``p1``, so what ``p1``
  publishes provably crosses to another process;
- ``migrations/scaletest``: the tables, and two files that each record that they ran (the second
  holds the migration lock a little while, so concurrent boots really contend for it).
"""

from __future__ import annotations

from pathlib import Path

from tests.kit import PROJECT, write

LINKED_TOOLS = ("http", "logger", "db", "event_bus", "store", "checkpoint", "system")
LINKED_DOMAINS = ("system", "agents")

RULE_LLM_TOOL = """
    from core import BaseTool
    from core.contracts.types import Delta, ToolCall, Usage, assemble_deltas

    USAGE = Usage(input_tokens=10, output_tokens=5, cost_usd=0.0001)


    class RuleLlm(BaseTool):
        name = "llm"
        default_model = "rule-model"

        async def stream(self, *, messages, model, tools=None, response_format=None, temperature=None,
                         max_tokens=None, cache_hint=None):
            results = sum(1 for message in messages if message.role == "tool")
            if results == 0:
                call = ToolCall("gate-1", "wait_for_gate", {})
                yield Delta(tool_calls=(call,), finish_reason="tool_calls", usage=USAGE)
                return
            yield Delta(text=f"done after {results} tool result(s)")
            yield Delta(finish_reason="stop", usage=USAGE)

        async def chat(self, **kwargs):
            return assemble_deltas([delta async for delta in self.stream(**kwargs)])

        async def complete(self, *, system, user, model, **settings):
            return "done"
"""

RECORDERS = """
    import asyncio
    import json
    import os
    import time
    from pathlib import Path

    from core import BasePlugin

    PID = os.getpid()
    NAME = os.environ.get("SCALE_NAME", "")


    async def record(db, group, event):
        await db.execute(
            "INSERT INTO scale_deliveries (grp, name, event_id, parent_id, emitter, payload, pid, at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            [group, event.name, event.id, event.parent_id, event.emitter, json.dumps(event.payload), PID,
             time.time()],
        )


    class Audit(BasePlugin):
        def __init__(self, event_bus, db):
            self.event_bus, self.db = event_bus, db

        async def on_boot(self):
            await self.event_bus.subscribe("scale.ping", self.on_ping)

        async def on_ping(self, event):
            await record(self.db, "scaletest.Audit", event)


    class Mailer(BasePlugin):
        def __init__(self, event_bus, db):
            self.event_bus, self.db = event_bus, db

        async def on_boot(self):
            if NAME != "p1":
                await self.event_bus.subscribe("scale.ping", self.on_ping)

        async def on_ping(self, event):
            await record(self.db, "scaletest.Mailer", event)
            await self.event_bus.publish("scale.pong", {"ping": event.payload["n"]})


    class PongAudit(BasePlugin):
        def __init__(self, event_bus, db):
            self.event_bus, self.db = event_bus, db

        async def on_boot(self):
            await self.event_bus.subscribe("scale.pong", self.on_pong)

        async def on_pong(self, event):
            await record(self.db, "scaletest.PongAudit", event)


    class Refuser(BasePlugin):
        def __init__(self, event_bus, db):
            self.event_bus, self.db = event_bus, db

        async def on_boot(self):
            await self.event_bus.subscribe("scale.fail", self.on_fail)

        async def on_fail(self, event):
            await record(self.db, "scaletest.Refuser", event)
            raise RuntimeError(f"refused order {event.payload['order']}")


    class SlowWorker(BasePlugin):
        def __init__(self, event_bus, db):
            self.event_bus, self.db = event_bus, db

        async def on_boot(self):
            await self.event_bus.subscribe("scale.slow", self.on_slow)

        async def on_slow(self, event):
            await record(self.db, "scaletest.SlowWorker:entered", event)
            gate = Path(os.environ["SCALE_GATE"])
            while not gate.exists():
                await asyncio.sleep(0.02)
            await record(self.db, "scaletest.SlowWorker:finished", event)


    class Quoter(BasePlugin):
        def __init__(self, event_bus):
            self.event_bus = event_bus

        async def on_boot(self):
            if NAME != "p1":
                await self.event_bus.subscribe("scale.quote", self.quote)

        async def quote(self, event):
            return {"sku": event.payload["sku"], "price_cents": 1490, "pid": PID}
"""

SCALE_API = """
    from core import BasePlugin


    class ScaleApi(BasePlugin):
        def __init__(self, http, event_bus):
            self.http, self.event_bus = http, event_bus

        def on_boot(self):
            self.http.add_endpoint("/scale/publish", "POST", self.publish)
            self.http.add_endpoint("/scale/ask", "POST", self.ask)
            self.http.add_endpoint("/scale/dead", "GET", self.dead)

        async def publish(self, data, context):
            return {"ids": [await self.event_bus.publish(data["name"], p) for p in data["payloads"]]}

        async def ask(self, data, context):
            return {"answer": await self.event_bus.request(data["name"], data["payload"], timeout=10)}

        async def dead(self, data, context):
            return {"dead": await self.event_bus.dead_letters()}
"""

SCALE_AGENT = """
    import asyncio
    import os
    import time
    from pathlib import Path

    from core import BasePlugin
    from core.agents import Agent, ReActCognition
    from core.contracts.types import ToolSchema
    from core.runs import catalog_for


    class WaitForGate:
        name = "wait_for_gate"
        side_effecting = False
        schema = ToolSchema("wait_for_gate", "Wait until the gate opens", {"type": "object"})

        def __init__(self, db):
            self.db = db

        async def run(self, args, ctx):
            await self.db.execute(
                "INSERT INTO scale_gate (run_id, pid, at) VALUES ($1, $2, $3)",
                [ctx.correlation_id, os.getpid(), time.time()],
            )
            gate = Path(os.environ["AGENT_GATE"])
            while not gate.exists():
                await asyncio.sleep(0.02)
            return "the gate is open"


    class ScaleOps(BasePlugin):
        def __init__(self, llm, db, container):
            self.llm, self.db = llm, db
            self.catalog = catalog_for(container)

        async def on_boot(self):
            agent = Agent("scale-ops", self.llm.default_model, ReActCognition([WaitForGate(self.db)]),
                          system="You wait for gates.")
            self.catalog.declare(agent, llm=self.llm, description="waits for a gate file")

        async def on_shutdown(self):
            self.catalog.withdraw("scale-ops")
"""

FIRST_MIGRATION = """
    -- What the scale-out tests record: deliveries (who got which event, in which process) and the
    -- processes that entered the agent's gate tool; and which migration files ran, once each.
    CREATE TABLE scale_deliveries (
        grp TEXT NOT NULL,
        name TEXT NOT NULL,
        event_id TEXT NOT NULL,
        parent_id TEXT,
        emitter TEXT,
        payload TEXT NOT NULL,
        pid INTEGER NOT NULL,
        at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE scale_gate (run_id TEXT NOT NULL, pid INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE scale_migration_runs (migration TEXT NOT NULL);
    INSERT INTO scale_migration_runs (migration) VALUES ('scaletest/001_scale.sql');
"""

SECOND_MIGRATION = """
    -- depends: 001_scale.sql
    -- Holds the migration lock a moment, so processes booting together really wait for each other.
    SELECT pg_sleep(0.2);
    INSERT INTO scale_migration_runs (migration) VALUES ('scaletest/002_slow.sql');
"""


def scale_root(directory: Path) -> Path:
    """Build the root under ``directory``; returns it."""
    root = directory / "root"
    (root / "tools").mkdir(parents=True)
    (root / "domains").mkdir()
    (root / "migrations").mkdir()
    for tool in (*LINKED_TOOLS, "_shared"):
        (root / "tools" / tool).symlink_to(PROJECT / "tools" / tool, target_is_directory=True)
    for domain in LINKED_DOMAINS:
        (root / "domains" / domain).symlink_to(PROJECT / "domains" / domain, target_is_directory=True)
    (root / "migrations" / "agents").symlink_to(PROJECT / "migrations" / "agents", target_is_directory=True)
    write(root, "tools/rule_llm/rule_llm_tool.py", RULE_LLM_TOOL)
    write(root, "domains/scaletest/plugins/recorders.py", RECORDERS)
    write(root, "domains/scaletest/plugins/scale_api.py", SCALE_API)
    write(root, "domains/scaletest/plugins/scale_agent.py", SCALE_AGENT)
    write(root, "migrations/scaletest/001_scale.sql", FIRST_MIGRATION)
    write(root, "migrations/scaletest/002_slow.sql", SECOND_MIGRATION)
    return root


def migration_files(root: Path) -> list[str]:
    """``<domain>/<file>`` of every migration the root has."""
    return sorted(f"{p.parent.name}/{p.name}" for p in (root / "migrations").glob("*/*.sql"))
