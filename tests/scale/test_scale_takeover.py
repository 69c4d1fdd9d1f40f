"""Three Keel processes, one killed (SIGKILL) at a time: what it held is taken over, once.

They boot together (migrations run once). An agent run started on one process, which is then
killed inside a tool call, is resumed from its last checkpoint by exactly one of the others once
its lease expires (``AGENT_RUN_LEASE_SECONDS``). An event a killed process was handling, never
acknowledged, is claimed by another process after ``EVENT_BUS_CLAIM_IDLE_MS`` and handled there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scale.cluster import Cluster
from tests.scale.conftest import ScaleServices, build_cluster
from tests.scale.probe import get_json, migrations_applied_once, post_json, rows, until

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def cluster(cluster_dir: Path, scale_services: ScaleServices) -> Iterator[Cluster]:
    cluster = build_cluster(cluster_dir, scale_services)
    try:
        cluster.start("p1", "p2", "p3")
        yield cluster
    finally:
        exits = cluster.stop_all()
    assert exits == cluster.clean_exits(), cluster.output()


async def test_three_processes_booting_together_apply_each_migration_once(
    cluster: Cluster, scale_services: ScaleServices
) -> None:
    await migrations_applied_once(cluster, scale_services.database_url)


async def test_a_run_on_a_killed_process_is_resumed_by_exactly_one_other(
    cluster: Cluster, scale_services: ScaleServices, cluster_dir: Path
) -> None:
    starter, *others = cluster.live()
    assert len(others) >= 2, "the take-over needs two candidates to show it happens once"
    started = await post_json(starter.url, "/agents/scale-ops/runs", {"input": "wait for the gate"})
    run_id = started["id"]

    async def inside_the_tool() -> bool:
        gate = await rows(scale_services.database_url, "SELECT pid FROM scale_gate WHERE run_id = $1", run_id)
        return [r["pid"] for r in gate] == [starter.pid]

    await until(inside_the_tool, "the run is inside wait_for_gate on the first process", cluster)
    cluster.kill(starter.name)  # mid-run: its lease is never released, its checkpoint says running
    (cluster_dir / "agent.gate").touch()

    async def completed() -> bool:
        run = await get_json(others[0].url, f"/agents/runs/{run_id}")
        return bool(run["status"] == "completed")

    await until(completed, "another process resumed the run and completed it", cluster)
    run = await get_json(others[1].url, f"/agents/runs/{run_id}")
    gate = await rows(
        scale_services.database_url, "SELECT pid FROM scale_gate WHERE run_id = $1 ORDER BY at", run_id
    )
    resumer = gate[-1]["pid"]
    assert [r["pid"] for r in gate] == [starter.pid, resumer]  # the cut-off call ran again, once
    assert resumer in {p.pid for p in others}
    assert run["resumed"] == 1
    assert run["output"] == "done after 1 tool result(s)"
    [index] = await rows(
        scale_services.database_url, "SELECT status, owner FROM agent_runs WHERE id = $1", run_id
    )
    assert index["status"] == "completed"
    assert f":{resumer}:" in index["owner"]  # the lease of the process that finished it


async def test_an_event_a_killed_process_was_handling_is_claimed_by_another(
    cluster: Cluster, scale_services: ScaleServices, cluster_dir: Path
) -> None:
    publisher, *_ = live = cluster.live()
    assert len(live) >= 2, "the claim needs a survivor"
    [event_id] = (await post_json(publisher.url, "/scale/publish", {"name": "scale.slow", "payloads": [{}]}))[
        "ids"
    ]
    entered_sql = "SELECT grp, pid FROM scale_deliveries WHERE event_id = $1 ORDER BY at"

    async def entered() -> bool:
        return bool(await rows(scale_services.database_url, entered_sql, event_id))

    await until(entered, "a process is handling the slow event", cluster)
    [first] = await rows(scale_services.database_url, entered_sql, event_id)
    holder = cluster.by_pid(first["pid"])
    cluster.kill(holder.name)  # it never acknowledges the entry
    (cluster_dir / "slow.gate").touch()

    async def finished() -> bool:
        deliveries = await rows(scale_services.database_url, entered_sql, event_id)
        return any(r["grp"].endswith(":finished") for r in deliveries)

    await until(finished, "another process claimed the event and handled it", cluster)
    deliveries = await rows(scale_services.database_url, entered_sql, event_id)
    claimer = next(r["pid"] for r in deliveries if r["grp"].endswith(":finished"))
    assert claimer != holder.pid
    assert [(r["grp"], r["pid"]) for r in deliveries] == [
        ("scaletest.SlowWorker:entered", holder.pid),
        ("scaletest.SlowWorker:entered", claimer),
        ("scaletest.SlowWorker:finished", claimer),
    ]
