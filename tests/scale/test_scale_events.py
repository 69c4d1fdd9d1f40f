"""Two Keel processes on one PostgreSQL database and one Redis act as one service.

They boot together (migrations run once), events published on one reach every subscriber group
exactly once wherever the group's processes are, a failing handler is retried and then
dead-lettered, a request is answered by the other process, and each process says who it is and
which of its backends are shared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from tests.scale.cluster import Cluster
from tests.scale.conftest import MAX_ATTEMPTS, ScaleServices, build_cluster
from tests.scale.probe import get_json, migrations_applied_once, post_json, rows, until

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def cluster(cluster_dir: Path, scale_services: ScaleServices) -> Iterator[Cluster]:
    cluster = build_cluster(cluster_dir, scale_services)
    try:
        cluster.start("p1", "p2")
        yield cluster
    finally:
        exits = cluster.stop_all()
    assert exits == cluster.clean_exits(), cluster.output()


async def deliveries(services: ScaleServices, name: str, event_ids: list[str]) -> list[dict[str, Any]]:
    return await rows(
        services.database_url,
        "SELECT grp, event_id, parent_id, emitter, payload, pid FROM scale_deliveries "
        "WHERE name = $1 AND (event_id = ANY($2::text[]) OR parent_id = ANY($2::text[])) ORDER BY at",
        name,
        event_ids,
    )


async def pending(services: ScaleServices, event: str, group: str) -> int:
    client = aioredis.Redis.from_url(services.redis_url, decode_responses=True)
    try:
        summary = await client.xpending(f"{services.prefix}events:stream:{event}", group)
        return int(summary["pending"])
    finally:
        await client.aclose()


async def test_processes_booting_together_apply_each_migration_once(
    cluster: Cluster, scale_services: ScaleServices
) -> None:
    await migrations_applied_once(cluster, scale_services.database_url)


async def test_an_event_reaches_every_group_once_whichever_process_publishes(
    cluster: Cluster, scale_services: ScaleServices
) -> None:
    p1, p2 = cluster["p1"], cluster["p2"]
    published = await post_json(
        p1.url, "/scale/publish", {"name": "scale.ping", "payloads": [{"n": n} for n in range(20)]}
    )
    ids: list[str] = published["ids"]

    async def all_delivered() -> bool:
        pings = await deliveries(scale_services, "scale.ping", ids)
        pongs = await deliveries(scale_services, "scale.pong", ids)
        return len(pings) >= 40 and len(pongs) >= 20

    async def all_acknowledged() -> bool:
        counts = [
            await pending(scale_services, "scale.ping", "scaletest.Audit"),
            await pending(scale_services, "scale.ping", "scaletest.Mailer"),
            await pending(scale_services, "scale.pong", "scaletest.PongAudit"),
        ]
        return counts == [0, 0, 0]

    await until(all_delivered, "every group got every ping and pong", cluster)
    await until(all_acknowledged, "every delivery acknowledged (nothing left to redeliver)", cluster)

    pings = await deliveries(scale_services, "scale.ping", ids)
    pongs = await deliveries(scale_services, "scale.pong", ids)
    audit = [r for r in pings if r["grp"] == "scaletest.Audit"]
    mailer = [r for r in pings if r["grp"] == "scaletest.Mailer"]
    assert sorted(r["event_id"] for r in audit) == sorted(ids)  # once each, across both processes
    assert sorted(r["event_id"] for r in mailer) == sorted(ids)
    assert {r["pid"] for r in audit} <= {p1.pid, p2.pid}
    assert {r["pid"] for r in mailer} == {p2.pid}  # only p2 subscribes it: every event crossed over
    assert len(pongs) == 20
    number_of = {r["event_id"]: json.loads(r["payload"])["n"] for r in mailer}
    for pong in pongs:  # published by p2's handler, caused by p1's event: the chain holds
        assert pong["emitter"] == "scaletest.Mailer.on_ping"
        assert json.loads(pong["payload"]) == {"ping": number_of[pong["parent_id"]]}
    assert sorted(p["parent_id"] for p in pongs) == sorted(ids)


async def test_a_failing_handler_is_retried_then_dead_lettered(
    cluster: Cluster, scale_services: ScaleServices
) -> None:
    p1, p2 = cluster["p1"], cluster["p2"]
    [event_id] = (
        await post_json(p2.url, "/scale/publish", {"name": "scale.fail", "payloads": [{"order": 5}]})
    )["ids"]

    async def dead_lettered() -> bool:
        dead = (await get_json(p1.url, "/scale/dead"))["dead"]
        return any(letter["id"] == event_id for letter in dead)

    await until(dead_lettered, "the failing event is in the dead-letter stream", cluster)
    letter = next(x for x in (await get_json(p1.url, "/scale/dead"))["dead"] if x["id"] == event_id)
    attempts = await deliveries(scale_services, "scale.fail", [event_id])
    client = aioredis.Redis.from_url(scale_services.redis_url, decode_responses=True)
    try:
        entries = await client.xrange(f"{scale_services.prefix}events:stream:scale.fail")
        [(stream_id, _)] = entries or []
    finally:
        await client.aclose()
    assert len(attempts) == MAX_ATTEMPTS
    assert len({r["pid"] for r in attempts}) == 1  # retried where it failed, not handed around
    assert letter["group"] == "scaletest.Refuser"
    assert letter["attempts"] == MAX_ATTEMPTS
    assert letter["error"] == "scaletest.Refuser.on_fail: RuntimeError: refused order 5"
    assert letter["stream_id"] == stream_id
    assert letter["payload"] == {"order": 5}
    assert await pending(scale_services, "scale.fail", "scaletest.Refuser") == 0


async def test_a_request_is_answered_by_the_other_process(cluster: Cluster) -> None:
    p1, p2 = cluster["p1"], cluster["p2"]
    answer = (await post_json(p1.url, "/scale/ask", {"name": "scale.quote", "payload": {"sku": "KB-1"}}))[
        "answer"
    ]
    assert answer == {"sku": "KB-1", "price_cents": 1490, "pid": p2.pid}


async def test_each_process_says_who_it_is_and_which_backends_are_shared(cluster: Cluster) -> None:
    consumers = set()
    for process in cluster.live():
        dump = await get_json(process.url, "/system/status")
        assert dump["kernel"]["process"]["pid"] == process.pid
        assert dump["kernel"]["per_process"] == ["metrics", "logs"]
        bus = dump["kernel"]["capabilities"]["event_bus"]
        assert (bus["backend"], bus["shared"]) == ("redis-streams", True)
        consumers.add(bus["consumer"])
        tools = dump["tools"]
        assert {name: tool["status"] for name, tool in tools.items()} == dict.fromkeys(tools, "OK")
        assert tools["db"]["message"].startswith("postgresql")
        assert tools["checkpoint"]["message"].startswith("postgresql")
        assert tools["store"]["message"].startswith("redis")
        metrics = await get_json(process.url, "/system/metrics")
        assert metrics["process"]["pid"] == process.pid and metrics["per_process"] is True
        assert (await first_log_line(process.url))["process"]["pid"] == process.pid
    assert len(consumers) == 2


async def first_log_line(url: str) -> dict[str, Any]:
    headers = {"Last-Event-ID": "0"}
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with client.stream("GET", "/system/logs/stream", headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    data: dict[str, Any] = json.loads(line.removeprefix("data: "))
                    if "process" in data:
                        return data
    raise AssertionError("the log stream ended without a line")
