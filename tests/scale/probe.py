"""Looking at a running cluster from the outside: the shared database, Redis, and bounded polling."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx

from tests.scale.cluster import Cluster
from tests.scale.scale_root import migration_files


async def rows(database_url: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    connection = await asyncpg.connect(database_url, timeout=5)
    try:
        return [dict(record) for record in await connection.fetch(sql, *args)]
    finally:
        await connection.close()


async def until(
    condition: Callable[[], Awaitable[bool]], what: str, cluster: Cluster, within: float = 20.0
) -> None:
    """Poll ``condition`` every 50 ms until it holds; fail naming ``what`` (and showing every
    process's output) after ``within`` seconds."""
    for _ in range(int(within / 0.05)):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: still not the case after {within}s\n{cluster.output()}")


async def get_json(url: str, path: str, **params: Any) -> Any:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.get(path, params=params)
        response.raise_for_status()
        return response.json()


async def post_json(url: str, path: str, body: dict[str, Any]) -> Any:
    async with httpx.AsyncClient(base_url=url, timeout=15) as client:
        response = await client.post(path, json=body)
        assert response.status_code < 300, (response.status_code, response.text)
        return response.json()


async def migrations_applied_once(cluster: Cluster, database_url: str) -> None:
    """Every migration file ran exactly once although the processes booted together: each file is
    recorded once, its own insert ran once, and the processes' counts of files applied at their
    boot add up to the number of files."""
    files = migration_files(cluster.root)
    runs = await rows(database_url, "SELECT migration FROM scale_migration_runs")
    recorded = await rows(database_url, "SELECT name FROM keel_migrations ORDER BY name")
    assert sorted(r["migration"] for r in runs) == [f for f in files if f.startswith("scaletest/")]
    assert [r["name"] for r in recorded] == files
    applied_here = []
    for process in cluster.live():
        message = (await get_json(process.url, "/system/status"))["tools"]["db"]["message"]
        found = re.search(r"(\d+) migration\(s\) applied at this boot", message)
        assert found, message
        applied_here.append(int(found.group(1)))
    assert sum(applied_here) == len(files), applied_here
