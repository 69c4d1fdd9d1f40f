"""Behaviour of run_sync, with and without a running event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from core.execution.sync_bridge import run_sync

tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")


async def where_and_what(value: int) -> tuple[int, asyncio.AbstractEventLoop, int]:
    await asyncio.sleep(0)
    return threading.get_ident(), asyncio.get_running_loop(), value * 2


async def explode() -> None:
    await asyncio.sleep(0)
    raise LookupError("from the coroutine")


def test_without_a_running_loop_it_runs_the_coroutine_in_this_thread() -> None:
    thread_id, loop, doubled = run_sync(where_and_what(21))
    assert thread_id == threading.get_ident()
    assert loop.is_closed()  # a loop of its own, closed again afterwards
    assert doubled == 42


def test_without_a_running_loop_the_coroutines_exception_reaches_the_caller() -> None:
    with pytest.raises(LookupError, match="from the coroutine"):
        run_sync(explode())


async def test_inside_a_running_loop_it_runs_on_a_worker_thread_and_blocks_for_the_result() -> None:
    caller_loop = asyncio.get_running_loop()
    thread_id, loop, doubled = run_sync(where_and_what(21))
    assert thread_id != threading.get_ident()
    assert loop is not caller_loop and loop.is_closed()
    assert doubled == 42
    assert asyncio.get_running_loop() is caller_loop


async def test_inside_a_running_loop_the_coroutines_exception_reaches_the_caller() -> None:
    with pytest.raises(LookupError, match="from the coroutine"):
        run_sync(explode())


async def test_inside_a_running_loop_the_callers_context_variables_carry_over() -> None:
    async def read_tenant() -> str:
        return tenant.get()

    token = tenant.set("org7")
    try:
        assert run_sync(read_tenant()) == "org7"
    finally:
        tenant.reset(token)


def sync_api() -> int:
    """A blocking signature over async work, as library code would write it."""

    async def work() -> int:
        return 7

    return run_sync(work())


async def test_a_sync_api_built_on_run_sync_works_from_async_code_and_sync_code() -> None:
    assert sync_api() == 7
    assert await asyncio.to_thread(sync_api) == 7
