"""Automatic pipelining: the Redis commands of many coroutines share round trips.

Every publish is an ``XADD`` and every delivery ends in an ``XACK``; sent one by one, each costs a
round trip (and, in the client, a command to encode and a reply to parse). :class:`AutoPipeline`
queues commands instead: when none is in flight the first goes out at once (so a lone caller
waits no longer than with a direct call), and everything queued while a round trip is in flight
goes out together in the next one. Each caller still awaits its own result, and an error reply
fails only the command it belongs to. Acknowledgements go one step further: those of one stream
and group waiting together become a single ``XACK``, so Redis and the client handle one command
per batch of deliveries rather than one per delivery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("keel.event_bus")

Queue = Callable[[Any], Any]
"""Adds one command to a redis-py pipeline (``lambda pipe: pipe.xack(...)``)."""


class AutoPipeline:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._queued: list[tuple[Queue, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._acks: dict[tuple[str, str], tuple[list[str], asyncio.Future[Any]]] = {}

    def submit(self, command: Queue) -> asyncio.Future[Any]:
        """Queue one command; the future gets its reply (or the error it raised)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.append((command, future))
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush(), name="keel-bus-pipeline")
        return future

    def ack(self, stream: str, group: str, entry_id: str) -> asyncio.Future[Any]:
        """Queue an ``XACK``; acknowledgements of one stream and group queued together go out as
        one ``XACK`` with every id (their callers share its future)."""
        key = (stream, group)
        waiting = self._acks.get(key)
        if waiting is None:
            future = self.submit(lambda pipe: pipe.xack(stream, group, *self._acks.pop(key)[0]))
            waiting = self._acks[key] = ([], future)
        waiting[0].append(entry_id)
        return waiting[1]

    async def drain(self) -> None:
        """Wait until every command queued so far has had its reply."""
        while (flusher := self._flusher) is not None:
            await asyncio.wait({flusher})

    async def _flush(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                pipe = self._client.pipeline(transaction=False)
                for command, _ in batch:
                    command(pipe)
                try:
                    replies: list[Any] = await pipe.execute(raise_on_error=False)
                except asyncio.CancelledError:
                    _fail(batch, ConnectionError("the event bus closed before Redis answered"))
                    raise
                except Exception as exc:  # the connection failed: every command of the batch did
                    replies = [exc] * len(batch)
                for (_, future), reply in zip(batch, replies, strict=True):
                    if future.done():
                        continue
                    if isinstance(reply, BaseException):
                        future.set_exception(reply)
                    else:
                        future.set_result(reply)
        finally:
            self._flusher = None
            if self._queued:  # cancelled with commands still waiting
                queued, self._queued = self._queued, []
                _fail(queued, ConnectionError("the event bus closed before the command was sent"))


def _fail(batch: list[tuple[Queue, asyncio.Future[Any]]], error: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(error)
