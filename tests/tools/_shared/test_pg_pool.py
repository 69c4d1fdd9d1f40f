"""``tools/_shared/pg_pool``: the pool bootstrap the store and the checkpoints share, on real PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.conftest import fresh_postgres_schema
from tests.tools.store.services import schema_created_later
from tools._shared.pg_pool import PgPool, create_lock

SCHEMA = "CREATE TABLE IF NOT EXISTS keel_probe (k TEXT PRIMARY KEY, v TEXT NOT NULL)"


class ProbeUnavailable(Exception):
    pass


def pool(dsn: str, **options: Any) -> PgPool:
    options = {"schema": SCHEMA, **options}
    return PgPool(
        dsn, table="keel_probe", owner="the probe's PostgreSQL", unavailable=ProbeUnavailable, **options
    )


async def test_the_first_call_opens_the_pool_and_creates_the_table() -> None:
    async with fresh_postgres_schema() as url:
        probe = pool(url, pool_max=2)
        try:
            await probe.run(lambda c: c.execute("INSERT INTO keel_probe VALUES ('a', '1')"))
            assert await probe.run(lambda c: c.fetchval("SELECT v FROM keel_probe WHERE k = 'a'")) == "1"
            assert probe.describe() == "postgresql (pool of up to 2 connections)"
        finally:
            await probe.close()
        await probe.close()  # closing twice is harmless


async def test_processes_opening_together_all_get_the_table() -> None:
    async with fresh_postgres_schema() as url:
        probes = [pool(url) for _ in range(4)]
        try:
            await asyncio.gather(*(p.open() for p in probes))
            counts = [await p.run(lambda c: c.fetchval("SELECT count(*) FROM keel_probe")) for p in probes]
            assert counts == [0, 0, 0, 0]
        finally:
            for p in probes:
                await p.close()


async def test_an_unreachable_server_is_the_owners_unavailable_error() -> None:
    probe = pool("postgresql://postgres@127.0.0.1:1/test", connect_timeout=2.0)
    with pytest.raises(ProbeUnavailable, match="cannot connect to the probe's PostgreSQL"):
        await probe.run(lambda c: c.fetchval("SELECT 1"))


async def test_a_refused_table_closes_the_pool_and_the_next_call_tries_again() -> None:
    async with schema_created_later() as (url, create):
        probe = pool(url)
        with pytest.raises(ProbeUnavailable, match="the probe's PostgreSQL cannot create its table"):
            await probe.open()
        await create()
        try:
            assert await probe.run(lambda c: c.fetchval("SELECT count(*) FROM keel_probe")) == 0
        finally:
            await probe.close()


async def test_a_refused_statement_is_the_owners_unavailable_error() -> None:
    async with fresh_postgres_schema() as url:
        probe = pool(url)
        try:
            with pytest.raises(ProbeUnavailable, match="the probe's PostgreSQL refused the operation"):
                await probe.run(lambda c: c.execute("SELECT * FROM no_such_table"))
            assert await probe.run(lambda c: c.fetchval("SELECT 1")) == 1
        finally:
            await probe.close()


async def test_several_schema_statements_make_every_table_in_order() -> None:
    async with fresh_postgres_schema() as url:
        probe = pool(url, schema=(SCHEMA, "CREATE INDEX IF NOT EXISTS keel_probe_v ON keel_probe (v)"))
        try:
            indexes = await probe.run(
                lambda c: c.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'keel_probe_v'")
            )
            assert indexes == 1
        finally:
            await probe.close()


async def test_a_lent_connection_leaves_refusals_to_the_caller() -> None:
    async with fresh_postgres_schema() as url:
        probe = pool(url)
        try:
            with pytest.raises(asyncpg.UndefinedTableError):
                async with probe.connection() as connection:
                    await connection.execute("SELECT * FROM no_such_table")
            async with probe.connection() as connection, connection.transaction():
                await connection.execute("INSERT INTO keel_probe VALUES ('a', '1')")
            assert await probe.run(lambda c: c.fetchval("SELECT v FROM keel_probe")) == "1"
        finally:
            await probe.close()


def test_the_create_lock_is_per_table_and_schema() -> None:
    assert (
        create_lock("keel_store")
        == "SELECT pg_advisory_xact_lock(hashtext('keel_store:' || current_schema()))"
    )
