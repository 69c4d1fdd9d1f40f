"""Triggered agent runs across two Keel processes on one PostgreSQL and one Redis: each published
event starts exactly one run, whichever process receives it and whichever fires its job, and a
schedule's ticks are fired once between them.

The root is the scale-out root plus the ``scheduler`` tool and a plugin declaring the agent
``triage`` with an ``on_event`` trigger (the agents domain's triggers plugin is linked already).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import PROJECT, write
from tests.scale.cluster import Cluster
from tests.scale.conftest import ScaleServices, build_cluster
from tests.scale.probe import post_json, rows, until

pytestmark = pytest.mark.services

TRIAGE = """
    from core import BasePlugin
    from core.agents import Agent, ReActCognition
    from core.runs import catalog_for
    from core.runs import triggers_for


    class Triage(BasePlugin):
        def __init__(self, llm, scheduler, db, container):
            self.llm, self.scheduler, self.db = llm, scheduler, db
            self.catalog, self.triggers = catalog_for(container), triggers_for(container)

        async def on_boot(self):
            self.catalog.declare(Agent("triage", "rule", ReActCognition([])), llm=self.llm)
            self.triggers.on_event("triage", "ticket.created", input="ticket {payload[n]}", max_calls=1)
            self.scheduler.every(0.3, self.tick, name="scaletest.tick")

        async def tick(self, job):
            await self.db.execute(
                "INSERT INTO scale_deliveries (grp, name, event_id, parent_id, emitter, payload, pid, at) "
                "VALUES ('tick', 'scaletest.tick', $1, NULL, NULL, '{}', 0, 0)",
                [repr(job["due_at"])],
            )

        def on_shutdown(self):
            self.triggers.withdraw_owner()
            self.catalog.withdraw("triage")
"""


@pytest.fixture(scope="module")
def cluster(cluster_dir: Path, scale_services: ScaleServices) -> Iterator[Cluster]:
    cluster = build_cluster(cluster_dir, scale_services)
    (cluster.root / "tools" / "scheduler").symlink_to(
        PROJECT / "tools" / "scheduler", target_is_directory=True
    )
    write(cluster.root, "domains/scaletest/plugins/triage.py", TRIAGE)
    cluster.env["SCHEDULER_POLL_SECONDS"] = "0.05"
    try:
        cluster.start("p1", "p2")
        yield cluster
    finally:
        exits = cluster.stop_all()
    assert exits == cluster.clean_exits(), cluster.output()


async def test_each_event_starts_exactly_one_run_across_processes(
    cluster: Cluster, scale_services: ScaleServices
) -> None:
    count = 12
    url = cluster["p1"].wait_serving()
    await post_json(
        url, "/scale/publish", {"name": "ticket.created", "payloads": [{"n": n} for n in range(count)]}
    )
    database = scale_services.database_url

    async def all_jobs_done() -> bool:
        done = await rows(
            database,
            "SELECT count(*) AS n FROM keel_sched_jobs WHERE name = 'agents.trigger' AND status = 'done'",
        )
        return int(done[0]["n"]) == count

    await until(all_jobs_done, "every event's trigger job is done", cluster, within=40)
    runs = await rows(database, "SELECT id FROM agent_runs WHERE agent = 'triage'")
    assert len(runs) == count
    jobs = await rows(database, "SELECT lease_owner, key FROM keel_sched_jobs WHERE name = 'agents.trigger'")
    assert len({j["key"] for j in jobs}) == count


async def test_two_processes_fire_each_tick_once(cluster: Cluster, scale_services: ScaleServices) -> None:
    database = scale_services.database_url

    async def ticks() -> list[str]:
        found = await rows(database, "SELECT event_id FROM scale_deliveries WHERE name = 'scaletest.tick'")
        return [str(r["event_id"]) for r in found]

    async def enough() -> bool:
        return len(await ticks()) >= 10

    await until(enough, "ten ticks fired", cluster, within=30)
    fired = await ticks()
    assert len(fired) == len(set(fired)), fired
