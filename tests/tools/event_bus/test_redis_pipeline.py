"""AutoPipeline against a real Redis: commands of many callers share round trips, and a caller's
batch (``replies`` > 1) gets its replies together, or the error one of them raised, alone."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from tests.conftest import fresh_redis_namespace
from tools.event_bus.redis_pipeline import AutoPipeline


async def test_a_batch_gets_its_replies_together_and_an_error_fails_only_its_own_caller() -> None:
    async with fresh_redis_namespace() as (url, prefix):
        client = aioredis.Redis.from_url(url, decode_responses=True)
        try:
            pipeline = AutoPipeline(client)
            await client.set(f"{prefix}text", "not a stream")

            def good_batch(pipe: Any) -> None:
                pipe.xadd(f"{prefix}s", {"n": "1"})
                pipe.xadd(f"{prefix}s", {"n": "2"})

            def bad_batch(pipe: Any) -> None:
                pipe.xadd(f"{prefix}s", {"n": "3"})
                pipe.xadd(f"{prefix}text", {"n": "4"})  # WRONGTYPE

            before = pipeline.submit(lambda pipe: pipe.incr(f"{prefix}count"))
            good = pipeline.submit(good_batch, replies=2)
            bad = pipeline.submit(bad_batch, replies=2)
            after = pipeline.submit(lambda pipe: pipe.incr(f"{prefix}count"))
            results = await asyncio.gather(before, good, bad, after, return_exceptions=True)
            assert results[0] == 1 and results[3] == 2
            ids = results[1]
            assert isinstance(ids, list) and len(ids) == 2 and ids[0] < ids[1]
            assert isinstance(results[2], ResponseError) and "WRONGTYPE" in str(results[2])
            assert await client.xlen(f"{prefix}s") == 3  # the bad batch's first command was carried out
        finally:
            await client.aclose()


async def test_a_lost_connection_fails_every_caller_of_the_round_trip_batch_or_not() -> None:
    """Nothing listens on the port: the pipeline's round trip fails, and every future of it (a
    batch of two commands and a single one) gets that error rather than hanging or a wrong reply."""
    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    try:
        pipeline = AutoPipeline(client)

        def batch(pipe: Any) -> None:
            pipe.set("a", "1")
            pipe.set("b", "2")

        results = await asyncio.gather(
            pipeline.submit(batch, replies=2),
            pipeline.submit(lambda pipe: pipe.get("a")),
            return_exceptions=True,
        )
        assert all(isinstance(r, OSError | RedisConnectionError) for r in results), results
        await pipeline.drain()
    finally:
        await client.aclose()
