"""Automatic pipelining: the Redis commands of many coroutines share round trips.

Every publish is an ``XADD`` and every delivery ends in an ``XACK``; sent one by one, each costs a
round trip (and, in the client, a command to encode and a reply to parse). :class:`AutoPipeline`
queues commands instead: when none is in flight the first goes out at once (so a lone caller
waits no longer than with a direct call), and everything queued while a round trip is in flight
goes out together in the next one. Each caller still awaits its own result, and an error reply
fails only the command it belongs to. Acknowledgements go one step further: those of one stream
and group waiting together become a single ``XACK``, so Redis and the client handle one command
per batch of deliveries rather than one per delivery, and with de-duplication on, the handled marks
of that batch travel in the same command (:data:`SETTLE_SCRIPT`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("keel.event_bus")

Queue = Callable[[Any], Any]
"""Adds one command to a redis-py pipeline (``lambda pipe: pipe.xack(...)``)."""

Translate = Callable[[BaseException], BaseException]
"""Turns the client's error into the one a caller should see (the bus's own errors)."""

SETTLE_SCRIPT = """
local ttl = ARGV[2]
for i = 2, #KEYS do redis.call('SET', KEYS[i], '1', 'PX', ttl) end
local acked = 0
for i = 3, #ARGV, 500 do
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
return acked
"""
"""Marks a batch of events handled (``SET seen PX ttl`` each), then acknowledges their entries.

KEYS = the stream, then the marks; ARGV = the group, the TTL in ms, then the entry ids. One script
rather than a ``SET`` per delivery and an ``XACK`` per batch: Redis and the client handle one command
for the whole batch, and the marks and the acknowledgement can no longer be split by a failed
connection. Were the script to fail part-way, marks exist for entries not yet acknowledged: those are
delivered again and skipped as duplicates, which is right, since their handlers succeeded."""


class AutoPipeline:
    """``translate`` is applied to every error a future gets, so a caller can await the future
    itself rather than a coroutine wrapped around it to translate (two coroutines per command)."""

    def __init__(self, client: Any, translate: Translate | None = None) -> None:
        self._client = client
        self._translate: Translate = translate or _same
        self._queued: list[tuple[Queue, asyncio.Future[Any], int]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._acks: dict[tuple[str, str], tuple[list[str], asyncio.Future[Any]]] = {}
        self._settles: dict[tuple[str, str, int], tuple[list[str], list[str], asyncio.Future[Any]]] = {}

    def submit(self, command: Queue, replies: int = 1) -> asyncio.Future[Any]:
        """Queue one command; the future gets its reply (or the error it raised). A ``command``
        that queues ``replies`` > 1 commands gets the list of their replies, or the first error:
        one future (and one wake-up) for a batch its caller sends together."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.append((command, future, replies))
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

    def settle(self, stream: str, group: str, entry_id: str, mark: str, ttl_ms: int) -> asyncio.Future[Any]:
        """Queue the handled mark ``mark`` and the ``XACK`` of ``entry_id``; those of one stream, group
        and TTL queued together go out as one :data:`SETTLE_SCRIPT` call (sharing its future)."""
        key = (stream, group, ttl_ms)
        waiting = self._settles.get(key)
        if waiting is None:

            def queue(pipe: Any) -> Any:
                ids, marks, _ = self._settles.pop(key)
                return pipe.eval(SETTLE_SCRIPT, 1 + len(marks), stream, *marks, group, ttl_ms, *ids)

            waiting = self._settles[key] = ([], [], self.submit(queue))
        waiting[0].append(entry_id)
        waiting[1].append(mark)
        return waiting[2]

    async def drain(self) -> None:
        """Wait until every command queued so far has had its reply."""
        while (flusher := self._flusher) is not None:
            await asyncio.wait({flusher})

    async def _flush(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                pipe = self._client.pipeline(transaction=False)
                for command, _, _ in batch:
                    command(pipe)
                try:
                    replies: list[Any] = await pipe.execute(raise_on_error=False)
                except asyncio.CancelledError:
                    closed = ConnectionError("the event bus closed before Redis answered")
                    _fail(batch, self._translate(closed))
                    raise
                except Exception as exc:  # the connection failed: every command of the batch did
                    replies = [exc] * sum(count for _, _, count in batch)
                at = 0
                for _, future, count in batch:
                    reply: Any = replies[at] if count == 1 else replies[at : at + count]
                    at += count
                    if future.done():
                        continue
                    if count != 1:
                        reply = next((r for r in reply if isinstance(r, BaseException)), reply)
                    if isinstance(reply, BaseException):
                        future.set_exception(self._translate(reply))
                    else:
                        future.set_result(reply)
        finally:
            self._flusher = None
            if self._queued:  # cancelled with commands still waiting
                queued, self._queued = self._queued, []
                error = ConnectionError("the event bus closed before the command was sent")
                _fail(queued, self._translate(error))


def _same(error: BaseException) -> BaseException:
    return error


def _fail(batch: list[tuple[Queue, asyncio.Future[Any], int]], error: BaseException) -> None:
    for _, future, _ in batch:
        if not future.done():
            future.set_exception(error)
