"""``EVENT_BUS_URL=redis://...``: the event bus across processes, over Redis Streams.

**Groups.** Every subscription belongs to a subscriber group (by default its plugin's identity,
``<domain>.<Class>``). Each event name is a stream, each group a consumer group on the streams of
the names it subscribes to, and each process a consumer of its groups. So every group receives
every event, and a group receives it once across all processes: whichever process reads it runs
that group's handlers for the name (all of them, if a plugin subscribed several). A group is
created at ``$`` the first time anyone subscribes it, so it receives the events published from
then on — also while every one of its processes is down: they wait in the stream and are
delivered when a process comes back.

**Trimming follows the slowest group.** Publishing never trims. Every maintenance tick, a stream
longer than ``EVENT_BUS_STREAM_MAXLEN`` loses its oldest entries, but only those every group on it
has acknowledged (``XTRIM MINID`` at the oldest entry some group still pending or not yet read).
Only past ``EVENT_BUS_STREAM_HARD_MAXLEN`` (10 x the soft length by default) are unacknowledged
entries dropped; each drop is counted (``dropped_unread`` in the counters and the dump, per
stream), and logged as an error naming the groups that lose events.

**At least once.** An entry is acknowledged (``XACK``) only after the group's handlers succeeded,
so a handler may see an event again (a crash between its effect and the acknowledgement, or a
publish the client sent twice): handlers must be idempotent. **De-duplication** narrows that: the
acknowledgement also records the event id for the group (``SET seen:<group>:<id> PX ttl`` in the
same round trip, ``EVENT_BUS_DEDUP_TTL_SECONDS``), and an entry whose event id the group already
handled is acknowledged without running the handlers (``duplicates_skipped``). Opt out per group
with ``subscribe(..., dedupe=False)``. A handler that raises is run again after
``EVENT_BUS_RETRY_BACKOFF_MS`` (doubling each time; only the handlers that failed run again), up
to ``EVENT_BUS_MAX_ATTEMPTS`` runs, counted in the stream itself (the entry's delivery count,
raised with ``XCLAIM ... RETRYCOUNT`` before each retry), so a crash does not reset it; then the
entry goes to the dead-letter stream with the error, the attempts, the group and its original id,
and is acknowledged (both in one ``MULTI``). A dead letter can be replayed to its group alone (the
entry is re-added with ``only_group``; other groups acknowledge it unread) or discarded.

A process that dies holding unacknowledged entries leaves
them pending; every process looks for entries of its groups idle for ``EVENT_BUS_CLAIM_IDLE_MS``
and claims them (``XAUTOCLAIM``). A process keeps the entries it is still working on fresh
(``XCLAIM ... JUSTID`` every third of that time), so a slow handler is not mistaken for a dead
one. An entry that has already been claimed more than ``EVENT_BUS_MAX_ATTEMPTS`` times (its
handlers keep taking their processes down) is dead-lettered without running it again.

**Causality and identity.** The entry carries the bus's own event id, parent id, emitter and
timestamp, and the handler runs with ``current_event_id_var`` set to that id; so what a handler
publishes in one process has the event that caused it, published in another, as its parent.

**Request/reply.** ``request`` writes the event with ``reply_to`` naming this process's inbox
stream, and counts the groups subscribed to the name in the same ``MULTI``. Each group that
handles it replies to the inbox: its first non-``None`` return value, or that it had none. The
first answer wins; when every counted group has replied without one, ``EventNoReplyError`` is
raised at once; no group at all raises it before waiting. A group that exists in Redis but has
no live process never replies, so that request ends in ``EventRequestTimeout`` instead.

**Connections.** Each group this process reads holds one connection blocked in ``XREADGROUP``
(woken with ``CLIENT UNBLOCK`` when subscriptions change or the bus stops); publishes,
acknowledgements and replies share one more, pipelined (:mod:`tools.event_bus.redis_pipeline`).
Redis unreachable: ``publish`` raises :class:`~tools.event_bus.errors.EventBusUnavailableError`,
readers retry with backoff, and nothing acknowledged is lost.

Not shared: the trace buffer (each process traces what it delivered) and the counters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .backend import DeliverToGroup, LocalGroups, Receive
from .errors import (
    EventBusError,
    EventBusUnavailableError,
    EventNoReplyError,
    EventPayloadError,
    EventRequestTimeout,
)
from .events import Event
from .inline_tasks import InlineTasks
from .payload import freeze_json, to_json
from .redis_pipeline import AutoPipeline
from .redis_settings import RedisBusSettings
from .redis_wire import (
    Keys,
    Received,
    ReplyKind,
    dead_letter_fields,
    dead_letter_view,
    event_fields,
    process_label,
    read_event,
    replayed_fields,
    reply_fields,
    stream_id_key,
)

log = logging.getLogger("keel.event_bus")

T = TypeVar("T")

BLOCK_MS = 2000
"""How long one ``XREADGROUP`` waits for entries before the reader looks at its subscriptions again."""
READ_COUNT = 128
CLAIM_COUNT = 100
CLAIM_ROUNDS = 10
"""``XAUTOCLAIM`` calls per stream and group per maintenance tick (``CLAIM_COUNT`` entries each)."""
JOIN_WAIT_SECONDS = 1.0
DRAIN_SECONDS = 5.0
INBOX_MAXLEN = 10_000
INBOX_TTL_MS = 600_000
TRIM_SCAN = 10_000
"""At most this many entries past the soft length are looked at per stream and tick."""
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
_NO_NAMES: frozenset[str] = frozenset()


@dataclass(eq=False)
class _Reader:
    """One group's reading loop and the connection it blocks on."""

    group: str
    client: Any
    names: frozenset[str] = _NO_NAMES
    client_id: int | None = None
    blocking: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    read_again: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class _Slots:
    """The concurrency bound: a counting semaphore whose uncontended take is a plain call, not a
    coroutine (``asyncio.Semaphore.acquire`` is one, and is taken once per entry read)."""

    __slots__ = ("free", "_waiters")

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiters: deque[asyncio.Future[None]] = deque()

    def take_free(self) -> bool:
        """Take a slot if one is free and nobody waits for one; whether it did."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot (first come, first served); a slot given to a waiter is passed on."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot, then cancelled: pass it on
            raise
        finally:
            if not waiter.done() or waiter.cancelled():
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def give(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes straight to it
                return
        self.free += 1


@dataclass(eq=False)
class _Request:
    """A request of this process waiting for its replies."""

    name: str
    future: asyncio.Future[Any]
    expected: int | None = None
    without_answer: int = 0

    def settle_if_unanswered(self) -> None:
        if self.expected is not None and self.without_answer >= self.expected and not self.future.done():
            self.future.set_exception(
                EventNoReplyError(f"no reply to {self.name!r}: every subscriber finished without a reply")
            )


class RedisStreamsBackend:
    """Subscriber groups over Redis Streams; see the module docstring for the rules."""

    def __init__(self, settings: RedisBusSettings) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.consumer = f"{process_label()}:{uuid.uuid4().hex[:6]}"
        self.inbox = self.keys.inbox(self.consumer)
        self._client = self._new_client(settings.connect_timeout)
        self._pipeline = AutoPipeline(self._client, _bus_error)
        self._deliver: DeliverToGroup | None = None
        self._groups: LocalGroups = dict
        self._readers: dict[str, _Reader] = {}
        self._joined: set[tuple[str, str]] = set()  # (stream, group) pairs known to exist
        self._held: dict[tuple[str, str], dict[str, float]] = {}  # entries being handled here
        self._handlers: set[asyncio.Task[Any]] = set()  # the tasks the handlers run in
        self._handling = InlineTasks(self._handlers, "keel-bus-handler")
        # Acknowledgements queued and not yet answered: (stream, group, entry ids) per command.
        self._settling: dict[asyncio.Future[Any], tuple[str, str, list[str]]] = {}
        self._chores: set[asyncio.Task[Any]] = set()
        self._slots = _Slots(settings.concurrency)
        self._requests: dict[str, _Request] = {}
        self._inbox_reader: _Reader | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._closed = False
        self._unreachable_since: float | None = None
        self._streams: set[str] = set()  # streams this process published to or reads
        self._no_dedupe: set[str] = set()  # groups that opted out of de-duplication
        self.counters = {
            "delivered": 0,
            "retried": 0,
            "dead_lettered": 0,
            "claimed": 0,
            "replied": 0,
            "duplicates_skipped": 0,
            "trimmed": 0,
            "dropped_unread": 0,
        }
        self.dropped: dict[str, int] = {}
        """Unacknowledged entries dropped by the hard cap, per event name."""
        self.health: dict[str, Any] = {"counters": self.counters, "dropped_unread": self.dropped, "lag": {}}
        """Shown live in the dump (``kernel.capabilities.event_bus.health``)."""

    def _new_client(self, socket_timeout: float) -> Any:
        return aioredis.Redis.from_url(
            self.settings.url,
            decode_responses=True,
            socket_connect_timeout=self.settings.connect_timeout,
            socket_timeout=socket_timeout,
            retry=Retry(NoBackoff(), 1),
        )

    def _blocking_client(self) -> Any:
        return aioredis.Redis.from_url(
            self.settings.url,
            decode_responses=True,
            socket_connect_timeout=self.settings.connect_timeout,
            socket_timeout=BLOCK_MS / 1000 + self.settings.connect_timeout,
            single_connection_client=True,
            retry=Retry(NoBackoff(), 1),
        )

    # -- the backend seam ------------------------------------------------------------------------

    def bind(self, receive: Receive) -> None:
        """Unused: events reach this process's subscribers through their groups (:meth:`attach`)."""

    def attach(self, deliver: DeliverToGroup, groups: LocalGroups) -> None:
        """``deliver(event, group, only)`` runs a group's handlers; ``groups()`` says who subscribes here."""
        self._deliver = deliver
        self._groups = groups

    async def start(self) -> None:
        """Start claiming stale entries; fail (the tool starts DEAD, and keeps trying) if Redis is down."""
        self._maintenance = asyncio.get_running_loop().create_task(
            self._maintain(), name="keel-bus-maintenance"
        )
        await self._call(self._client.ping)

    def send(self, event: Event) -> Awaitable[None]:
        """The ``XADD``'s future itself (its errors already the bus's): no coroutine per publish."""
        if self._closed:
            raise EventBusUnavailableError("the event bus has been shut down")
        fields = event_fields(event)
        stream = self.keys.stream(event.name)
        self._streams.add(stream)
        return self._pipeline.submit(lambda pipe: pipe.xadd(stream, fields))

    def send_many(self, events: Sequence[Event]) -> Awaitable[Any]:
        """One ``XADD`` each, all in one round trip, and one future for them all."""
        if self._closed:
            raise EventBusUnavailableError("the event bus has been shut down")
        adds = [(self.keys.stream(event.name), event_fields(event)) for event in events]
        self._streams.update(stream for stream, _ in adds)

        def queue(pipe: Any) -> None:
            for stream, fields in adds:
                pipe.xadd(stream, fields)

        return self._pipeline.submit(queue, replies=len(adds))

    async def ping(self) -> bool:
        """Whether Redis answers (the tool's health check)."""
        await self._call(self._client.ping)
        return True

    def describe(self) -> str:
        return f"redis streams at {_redacted(self.settings.url)} (prefix {self.settings.prefix!r})"

    def capability(self) -> dict[str, Any]:
        return {
            "backend": "redis-streams",
            "shared": True,
            "url": _redacted(self.settings.url),
            "prefix": self.settings.prefix,
            "consumer": self.consumer,
            "dead_letter_stream": self.keys.dead,
            "claim_idle_ms": self.settings.claim_idle_ms,
            "max_attempts": self.settings.max_attempts,
            "delivery": "at-least-once",
            "dedup_ttl_seconds": self.settings.dedup_ttl_seconds,
            "stream_maxlen": self.settings.stream_maxlen,
            "stream_hard_maxlen": self.settings.stream_hard_maxlen,
            "health": self.health,
        }

    def set_dedupe(self, group: str, enabled: bool) -> None:
        """Turn de-duplication by event id on or off for ``group`` (on by default)."""
        if enabled:
            self._no_dedupe.discard(group)
        else:
            self._no_dedupe.add(group)

    def _dedupes(self, group: str) -> bool:
        return self.settings.dedup_ttl_seconds > 0 and group not in self._no_dedupe

    # -- subscriptions -----------------------------------------------------------------------------

    async def join(self, name: str, group: str) -> None:
        """Make sure ``group`` exists on ``name``'s stream and, if it subscribes here, is read here."""
        if self._stop.is_set():
            return
        try:
            await self._ensure_groups(group, (name,), start="$")
        except EventBusError as exc:
            log.warning(
                "event bus: cannot create group %s for %r yet (%s); retrying in the background",
                group,
                name,
                exc,
            )
        reader = self._readers.get(group) or self._start_reader(group)
        if name in self._groups().get(group, _NO_NAMES):
            await self._until_reading(reader, name)

    def changed(self) -> None:
        """Subscriptions changed: wake the readers whose streams are no longer the right ones."""
        if self._stop.is_set() or not self._readers:
            return
        current = self._groups()
        for group, reader in self._readers.items():
            if current.get(group, _NO_NAMES) != reader.names:
                reader.wake.set()
                if reader.blocking:
                    self._chore(self._unblock(reader))

    async def _ensure_groups(self, group: str, names: Iterable[str], *, start: str) -> None:
        for name in names:
            stream = self.keys.stream(name)
            self._streams.add(stream)
            if (stream, group) in self._joined:
                continue
            try:
                await self._call(self._client.xgroup_create, stream, group, id=start, mkstream=True)
            except EventBusError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._joined.add((stream, group))

    def _start_reader(self, group: str) -> _Reader:
        reader = _Reader(group, self._blocking_client())
        self._readers[group] = reader
        reader.task = asyncio.get_running_loop().create_task(self._read(reader), name=f"keel-bus-{group}")
        return reader

    async def _until_reading(self, reader: _Reader, name: str) -> None:
        """Wait (bounded) until the group's reader reads ``name``'s stream, so what is published
        after ``subscribe`` returns is read at once rather than when the reader next looks."""
        try:
            async with asyncio.timeout(JOIN_WAIT_SECONDS):
                while True:
                    reader.read_again.clear()
                    if name in reader.names or reader.task is None or reader.task.done():
                        return
                    reader.wake.set()
                    woken = await self._unblock(reader) if reader.blocking else True
                    try:
                        async with asyncio.timeout(0.1 if woken else 0.01):
                            await reader.read_again.wait()
                    except TimeoutError:
                        pass
        except TimeoutError:
            log.debug("event bus: group %s does not read %r yet; it will next time", reader.group, name)

    async def _unblock(self, reader: _Reader) -> bool:
        if reader.client_id is None:
            return False
        try:
            return bool(await self._client.client_unblock(reader.client_id))
        except (RedisError, OSError):
            return False

    # -- reading -----------------------------------------------------------------------------------

    async def _read(self, reader: _Reader) -> None:
        group, failures, start = reader.group, 0, "$"
        while not self._stop.is_set():
            reader.wake.clear()  # before looking, so a change made while we look still wakes us
            names = self._groups().get(group, _NO_NAMES)
            reader.names = names
            reader.read_again.set()
            if not names:
                await self._first(reader.wake.wait())
                continue
            streams = {self.keys.stream(name): ">" for name in sorted(names)}
            try:
                await self._ensure_groups(group, names, start=start)
                if reader.client_id is None:
                    reader.client_id = int(await reader.client.client_id())
                reader.blocking = True
                try:
                    response = await reader.client.xreadgroup(
                        group, self.consumer, streams, count=READ_COUNT, block=BLOCK_MS
                    )
                finally:
                    reader.blocking = False
            except asyncio.CancelledError:
                raise
            except (EventBusUnavailableError, *_UNREACHABLE) as exc:
                reader.client_id = None
                failures += 1
                self._unreachable(exc)
                await self._first(self._stop.wait(), within=_retry_delay(failures))
                continue
            except (RedisError, EventBusError) as exc:
                if "NOGROUP" in str(exc):
                    # A stream (with its groups) was deleted: recreate them, from its first entry.
                    self._joined.difference_update((stream, group) for stream in streams)
                    start = "0"
                    continue
                failures += 1
                if failures == 1 or failures % 30 == 0:
                    log.error("event bus: group %s cannot read (%d tries so far): %s", group, failures, exc)
                await self._first(self._stop.wait(), within=_retry_delay(failures))
                continue
            failures, start = 0, "$"
            self._reachable()
            for stream, entries in response or ():
                # Each entry decoded once, here: the marks lookup and the handling share the result.
                received = [_received(fields) for _, fields in entries]
                seen = await self._seen_marks(reader, received)
                for index, (entry_id, fields) in enumerate(entries):
                    waiting = self._dispatch(group, stream, entry_id, fields, 1, seen[index], received[index])
                    if waiting is not None:
                        await waiting

    async def _seen_marks(self, reader: _Reader, received: list[Received | None]) -> list[bool | None]:
        """Whether the reader's group already handled each entry's event, for a whole read in one
        ``MGET`` (instead of an ``EXISTS`` per entry); ``None`` where it is not known (dedup off, an
        entry that is not an event, or Redis not answering: then each entry asks for itself).

        Asked on the reader's own connection, idle between its reads, so the read's handling never
        waits behind the publishes and acknowledgements queued on the shared one."""
        group = reader.group
        unknown: list[bool | None] = [None] * len(received)
        if not self._dedupes(group):
            return unknown
        ids = [r.event.id if r is not None else None for r in received]
        keys = [self.keys.seen(group, event_id) for event_id in ids if event_id]
        if not keys:
            return unknown
        try:
            marks = iter(await self._call(reader.client.mget, keys))
        except (RedisError, EventBusError, *_UNREACHABLE):
            return unknown
        return [None if not event_id else next(marks) is not None for event_id in ids]

    def _dispatch(
        self,
        group: str,
        stream: str,
        entry_id: str,
        fields: Mapping[str, str] | None,
        deliveries: int,
        seen: bool | None = None,
        received: Received | None = None,
    ) -> Coroutine[Any, Any, None] | None:
        """Start handling one entry (unless this process already is), within the concurrency bound.

        ``None`` when that is done; else what to await for a slot first. Not a coroutine itself:
        with a slot free, as nearly always, an entry costs no coroutine until its handling."""
        held = self._held.get((stream, group))
        if held is None:
            held = self._held[(stream, group)] = {}
        if entry_id in held or fields is None or self._stop.is_set():
            return None
        held[entry_id] = time.monotonic()
        handling = self._handle(group, stream, entry_id, fields, deliveries, seen, received)
        if not self._slots.take_free():
            return self._start_when_free(handling, held, entry_id)
        # No task per entry: most handlers finish without waiting (InlineTasks).
        self._handling.start(handling)
        return None

    async def _start_when_free(
        self, handling: Coroutine[Any, Any, None], held: dict[str, float], entry_id: str
    ) -> None:
        try:
            await self._slots.take()
        except BaseException:
            handling.close()
            raise
        if self._stop.is_set():  # stopped while waiting for a slot: leave the entry pending
            handling.close()
            held.pop(entry_id, None)
            self._slots.give()
            return
        self._handling.start(handling)

    # -- handling one entry ------------------------------------------------------------------------

    async def _handle(
        self,
        group: str,
        stream: str,
        entry_id: str,
        fields: Mapping[str, str],
        deliveries: int,
        seen: bool | None = None,
        received: Received | None = None,
    ) -> None:
        settling = False  # the acknowledgement, once queued, releases the entry (_settled)
        try:
            if self._stop.is_set():  # stopped before it started: the entry stays pending
                return
            if received is None:
                try:
                    received = read_event(fields)
                except ValueError as exc:
                    await self._dead_letter(stream, group, entry_id, fields, {"event_bus": str(exc)}, 0)
                    return
            event, reply_to = received.event, received.reply_to
            only_group = fields.get("only_group")
            if only_group is not None and only_group != group:  # a dead letter replayed to another group
                await self._call(self._pipeline.ack, stream, group, entry_id)
                return
            if self._dedupes(group) and (
                seen
                if seen is not None  # looked up for the whole read (_seen_marks)
                else await self._call(
                    self._pipeline.submit, lambda pipe: pipe.exists(self.keys.seen(group, event.id))
                )
            ):
                log.info(
                    "event bus: group %s already handled event %s (%s); entry %s acknowledged unrun",
                    group,
                    event.id,
                    event.name,
                    entry_id,
                )
                await self._call(self._pipeline.ack, stream, group, entry_id)
                self.counters["duplicates_skipped"] += 1
                await self._reply(reply_to, event.id, group, ReplyKind.NONE, "a duplicate, handled before")
                return
            if deliveries > self.settings.max_attempts:
                reason = (
                    f"delivered {deliveries} times without being acknowledged "
                    "(the processes handling it stopped)"
                )
                await self._dead_letter(stream, group, entry_id, fields, {"event_bus": reason}, 0)
                await self._reply(reply_to, event.id, group, ReplyKind.NONE, reason)
                return
            settling = await self._run(group, stream, entry_id, fields, event, reply_to, deliveries)
        except asyncio.CancelledError:
            raise  # the bus is stopping: the entry stays pending and another process claims it
        except (RedisError, EventBusError, *_UNREACHABLE) as exc:
            log.warning(
                "event bus: could not settle entry %s of %s for group %s (%s); it will be delivered again",
                entry_id,
                stream,
                group,
                exc,
            )
        finally:
            if not settling:
                held = self._held.get((stream, group))
                if held is not None:
                    held.pop(entry_id, None)
                self._slots.give()

    async def _run(
        self,
        group: str,
        stream: str,
        entry_id: str,
        fields: Mapping[str, str],
        event: Event,
        reply_to: str | None,
        deliveries: int = 1,
    ) -> bool:
        """Run the group's handlers on the entry, retrying and dead-lettering it; True when it
        ends with the entry's acknowledgement queued (:meth:`_settle`), which then releases it."""
        deliver = self._deliver
        if deliver is None:
            return False
        only: frozenset[str] | None = None
        answer: Any = None
        attempts = max(0, deliveries - 1)  # runs before this delivery, as the stream counts them
        failures: dict[str, str] = {}
        while True:
            attempts += 1
            outcome = await deliver(event, group, only)
            if outcome is None:  # nobody here subscribes any more: leave it to a process that does
                return False
            if answer is None:
                answer = outcome.answer
            if not outcome.failures:
                if reply_to is not None:
                    await self._answer(reply_to, event.id, group, answer)
                self._settle(stream, group, entry_id, event.id)
                return True
            failures = outcome.failures
            only = frozenset(failures)
            if attempts >= self.settings.max_attempts:
                break
            self.counters["retried"] += 1
            await asyncio.sleep(self.settings.backoff_seconds(attempts))
            # The next run is delivery attempts + 1: record it in the stream, so that a process
            # that claims the entry after a crash goes on counting from there.
            await self._call(
                self._client.xclaim,
                stream,
                group,
                self.consumer,
                0,
                [entry_id],
                retrycount=attempts + 1,
                justid=True,
            )
        await self._dead_letter(stream, group, entry_id, fields, failures, attempts)
        await self._reply(reply_to, event.id, group, ReplyKind.NONE, "its subscribers failed")
        return False

    def _settle(self, stream: str, group: str, entry_id: str, event_id: str) -> None:
        """Queue the acknowledgement of a handled entry, and the mark of its event id handled for the
        group (one command for every entry settled in the same round trip: ``AutoPipeline.settle``).

        Nobody waits for it: the entries sharing the command are released (held, slot, counted
        delivered) by one callback when Redis answers (:meth:`_settled`), rather than by a wake-up
        of each entry's task."""
        if self._dedupes(group):
            mark, ttl_ms = self.keys.seen(group, event_id), self.settings.dedup_ttl_seconds * 1000
            future = self._pipeline.settle(stream, group, entry_id, mark, ttl_ms)
        else:
            future = self._pipeline.ack(stream, group, entry_id)
        batch = self._settling.get(future)
        if batch is None:
            batch = self._settling[future] = (stream, group, [])
            future.add_done_callback(self._settled)
        batch[2].append(entry_id)

    def _settled(self, future: asyncio.Future[Any]) -> None:
        stream, group, entry_ids = self._settling.pop(future)
        error = future.exception() if not future.cancelled() else EventBusError("the bus stopped first")
        if error is None:
            self.counters["delivered"] += len(entry_ids)  # counted once acknowledged
        else:
            log.warning(
                "event bus: could not settle entries %s of %s for group %s (%s); they will be delivered "
                "again",
                ", ".join(entry_ids),
                stream,
                group,
                error,
            )
        held = self._held.get((stream, group))
        for entry_id in entry_ids:
            if held is not None:
                held.pop(entry_id, None)
            self._slots.give()

    async def _dead_letter(
        self,
        stream: str,
        group: str,
        entry_id: str,
        fields: Mapping[str, str],
        failures: Mapping[str, str],
        attempts: int,
    ) -> None:
        letter = dead_letter_fields(
            fields,
            stream_id=entry_id,
            group=group,
            failures=failures,
            attempts=attempts,
            failed_at=time.time(),
            consumer=self.consumer,
        )
        pipe = self._client.pipeline(transaction=True)
        pipe.xadd(self.keys.dead, letter, maxlen=self.settings.stream_maxlen or None)
        pipe.xack(stream, group, entry_id)
        await self._call(pipe.execute)
        self.counters["dead_lettered"] += 1
        log.error(
            "event bus: group %s gave up on %s (entry %s of %s) after %d attempt(s): %s",
            group,
            letter.get("name"),
            entry_id,
            stream,
            attempts,
            letter["error"],
        )

    # -- request/reply -----------------------------------------------------------------------------

    async def request(self, event: Event, timeout: float) -> Any:  # noqa: ASYNC109
        """Publish ``event`` asking for replies in this process's inbox; the first answer."""
        if self._stop.is_set():
            raise EventBusUnavailableError("the event bus has been shut down")
        self._open_inbox()
        waiting = _Request(event.name, asyncio.get_running_loop().create_future())
        self._requests[event.id] = waiting
        stream = self.keys.stream(event.name)
        fields = event_fields(event, reply_to=self.inbox)
        self._streams.add(stream)
        try:
            async with asyncio.timeout(timeout):
                pipe = self._client.pipeline(transaction=True)
                pipe.xadd(stream, fields)
                pipe.xinfo_groups(stream)
                _, groups = await self._call(pipe.execute)
                if not groups:
                    raise EventNoReplyError(f"no reply to {event.name!r}: nobody subscribes to it")
                waiting.expected = len(groups)
                waiting.settle_if_unanswered()
                return await waiting.future
        except TimeoutError:
            raise EventRequestTimeout(f"no reply to {event.name!r} within {timeout:g}s") from None
        finally:
            self._requests.pop(event.id, None)

    async def _answer(self, reply_to: str, request_id: str, group: str, answer: Any) -> None:
        if answer is None:
            await self._reply(reply_to, request_id, group, ReplyKind.NONE, "finished without a reply")
            return
        try:
            text, kind = to_json(freeze_json(answer, what="reply")), ReplyKind.ANSWER
        except EventPayloadError as exc:
            text, kind = str(exc), ReplyKind.ERROR
        await self._reply(reply_to, request_id, group, kind, text)

    async def _reply(
        self, reply_to: str | None, request_id: str, group: str, kind: ReplyKind, value: str
    ) -> None:
        if reply_to is None:
            return
        fields = reply_fields(request_id, group, kind, value)
        submit = self._pipeline.submit
        await asyncio.gather(
            self._call(submit, lambda pipe: pipe.xadd(reply_to, fields, maxlen=INBOX_MAXLEN)),
            self._call(submit, lambda pipe: pipe.pexpire(reply_to, INBOX_TTL_MS)),
        )
        self.counters["replied"] += 1

    def _open_inbox(self) -> None:
        if self._inbox_reader is None and not self._stop.is_set():
            reader = _Reader("inbox", self._blocking_client())
            loop = asyncio.get_running_loop()
            reader.task = loop.create_task(self._read_inbox(reader), name="keel-bus-inbox")
            self._inbox_reader = reader

    async def _read_inbox(self, reader: _Reader) -> None:
        last, failures = "0-0", 0
        while not self._stop.is_set():
            try:
                if reader.client_id is None:
                    reader.client_id = int(await reader.client.client_id())
                reader.blocking = True
                try:
                    response = await reader.client.xread({self.inbox: last}, count=READ_COUNT, block=BLOCK_MS)
                finally:
                    reader.blocking = False
            except asyncio.CancelledError:
                raise
            except (RedisError, *_UNREACHABLE) as exc:
                reader.client_id = None
                failures += 1
                self._unreachable(exc)
                await self._first(self._stop.wait(), within=_retry_delay(failures))
                continue
            failures = 0
            for _, entries in response or ():
                for entry_id, fields in entries:
                    last = entry_id
                    self._on_reply(fields)

    def _on_reply(self, fields: Mapping[str, str]) -> None:
        waiting = self._requests.get(fields.get("request", ""))
        if waiting is None or waiting.future.done():
            return  # the request timed out, or another group answered first
        if ReplyKind.ANSWER in fields:
            try:
                waiting.future.set_result(freeze_json(json.loads(fields[ReplyKind.ANSWER]), what="reply"))
            except (ValueError, EventPayloadError) as exc:
                waiting.future.set_exception(EventPayloadError(f"the reply is not JSON: {exc}"))
        elif ReplyKind.ERROR in fields:
            waiting.future.set_exception(EventPayloadError(fields[ReplyKind.ERROR]))
        else:
            waiting.without_answer += 1
            waiting.settle_if_unanswered()

    # -- claiming what stopped processes left, keeping our own entries fresh ---------------------

    async def _maintain(self) -> None:
        tick = max(0.01, self.settings.claim_idle_ms / 3000)
        while not self._stop.is_set():
            await self._first(self._stop.wait(), within=tick)
            if self._stop.is_set():
                return
            try:
                await self._keep_fresh()
                await self._claim_stale()
                await self.trim()
            except asyncio.CancelledError:
                raise
            except (RedisError, EventBusError, *_UNREACHABLE) as exc:
                self._unreachable(exc)

    async def _keep_fresh(self) -> None:
        """Reset the idle time of entries this process has been handling for a while."""
        now = time.monotonic()
        due = self.settings.claim_idle_ms / 3000
        pipe = None
        for (stream, group), held in self._held.items():
            stale = [entry_id for entry_id, since in held.items() if now - since >= due]
            if not stale:
                continue
            if pipe is None:
                pipe = self._client.pipeline(transaction=False)
            pipe.xclaim(stream, group, self.consumer, 0, stale, justid=True)
            for entry_id in stale:
                held[entry_id] = now
        if pipe is not None:
            await self._call(pipe.execute, raise_on_error=False)

    async def _claim_stale(self) -> None:
        """Take over entries of this process's groups that another consumer left idle too long."""
        for group, names in self._groups().items():
            for name in sorted(names):
                stream = self.keys.stream(name)
                if (stream, group) not in self._joined:
                    continue
                cursor = "0-0"
                for _ in range(CLAIM_ROUNDS):
                    reply = await self._call(
                        self._client.xautoclaim,
                        stream,
                        group,
                        self.consumer,
                        self.settings.claim_idle_ms,
                        cursor,
                        count=CLAIM_COUNT,
                    )
                    cursor, claimed = reply[0], [(i, f) for i, f in reply[1] if f is not None]
                    if claimed:
                        await self._take_over(group, stream, claimed)
                    if cursor == "0-0":
                        break

    async def _take_over(self, group: str, stream: str, claimed: list[tuple[str, dict[str, str]]]) -> None:
        fresh = [(i, f) for i, f in claimed if i not in self._held.get((stream, group), {})]
        if not fresh:
            return
        pipe = self._client.pipeline(transaction=False)
        for entry_id, _ in fresh:
            pipe.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
        pending = await self._call(pipe.execute)
        for (entry_id, fields), rows in zip(fresh, pending, strict=True):
            deliveries = int(rows[0]["times_delivered"]) if rows else 2
            self.counters["claimed"] += 1
            log.warning(
                "event bus: group %s claimed %s (entry %s of %s, delivery %d) left idle by its consumer",
                group,
                self.keys.name_of(stream),
                entry_id,
                stream,
                deliveries,
            )
            waiting = self._dispatch(group, stream, entry_id, fields, deliveries)
            if waiting is not None:
                await waiting

    # -- reading the dead letters ------------------------------------------------------------------

    async def dead_letters(self, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` dead letters, newest first."""
        entries = await self._call(self._client.xrevrange, self.keys.dead, count=limit)
        return [dead_letter_view(entry_id, fields) for entry_id, fields in entries or ()]

    async def replay_dead_letter(self, letter_id: str) -> bool:
        """Deliver a dead letter's event again, to its group only; False if there is no such letter.

        The letter leaves the dead-letter stream in the same ``MULTI`` that re-adds the event."""
        entries = await self._call(self._client.xrange, self.keys.dead, min=letter_id, max=letter_id)
        if not entries:
            return False
        letter = entries[0][1]
        stream = self.keys.stream(letter.get("name", ""))
        pipe = self._client.pipeline(transaction=True)
        pipe.xadd(stream, replayed_fields(letter))
        pipe.xdel(self.keys.dead, letter_id)
        await self._call(pipe.execute)
        self._streams.add(stream)
        log.info("event bus: dead letter %s replayed to group %s", letter_id, letter.get("group"))
        return True

    async def discard_dead_letter(self, letter_id: str) -> bool:
        """Delete a dead letter; False if there is no such letter."""
        return bool(await self._call(self._client.xdel, self.keys.dead, letter_id))

    # -- trimming by the slowest group, and lag --------------------------------------------------

    async def lag(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per event name and group: entries pending (read, not acknowledged) and not yet read."""
        report: dict[str, dict[str, dict[str, Any]]] = {}
        for stream in sorted(self._streams):
            try:
                groups = await self._call(self._client.xinfo_groups, stream)
            except EventBusError:
                continue  # the stream does not exist (yet)
            name = self.keys.name_of(stream)
            for info in groups:
                report.setdefault(name, {})[str(info["name"])] = {
                    "pending": int(info.get("pending") or 0),
                    "unread": info.get("lag"),
                    "last_delivered": info.get("last-delivered-id"),
                }
        self.health["lag"] = report
        return report

    async def trim(self) -> None:
        """Trim every stream this process knows past its soft length, by its slowest group."""
        if not self.settings.stream_maxlen and not self.settings.stream_hard_maxlen:
            return
        for stream in sorted(self._streams):
            await self._trim(stream)
        await self.lag()

    async def _trim(self, stream: str) -> None:
        soft, hard = self.settings.stream_maxlen, self.settings.stream_hard_maxlen
        length = int(await self._call(self._client.xlen, stream))
        if soft and length > soft:
            bound = await self._oldest_needed(stream)
            # In one script, so that two processes trimming at once cannot both cut from the front.
            removed = int(
                await self._call(self._client.eval, _TRIM_SCRIPT, 1, stream, soft, bound or "", TRIM_SCAN)
            )
            self.counters["trimmed"] += removed
            length -= removed
        if hard and length > hard:
            behind = await self._groups_behind(stream, length - hard)
            dropped = int(await self._call(self._client.xtrim, stream, maxlen=hard, approximate=False))
            if dropped:
                name = self.keys.name_of(stream)
                self.counters["dropped_unread"] += dropped
                self.dropped[name] = self.dropped.get(name, 0) + dropped
                log.error(
                    "event bus: %s is over EVENT_BUS_STREAM_HARD_MAXLEN (%d): dropped its %d oldest "
                    "entries, which groups %s had not acknowledged",
                    name,
                    hard,
                    dropped,
                    ", ".join(behind) or "(none known)",
                )

    async def _oldest_needed(self, stream: str) -> str | None:
        """The oldest entry id some group on ``stream`` has not acknowledged (``None``: none is)."""
        groups = await self._call(self._client.xinfo_groups, stream)
        oldest: str | None = None
        for info in groups:
            if int(info.get("pending") or 0):
                summary = await self._call(self._client.xpending, stream, info["name"])
                needed = str(summary["min"])
            else:
                needed = _successor(str(info["last-delivered-id"]))
            if oldest is None or stream_id_key(needed) < stream_id_key(oldest):
                oldest = needed
        if oldest is None:  # no group: nobody will read these entries
            return None
        return oldest

    async def _groups_behind(self, stream: str, count: int) -> list[str]:
        """The groups that have not acknowledged every one of the oldest ``count`` entries."""
        cut = await self._call(self._client.xrange, stream, count=min(count, TRIM_SCAN))
        if not cut:
            return []
        last = cut[-1][0]
        groups = await self._call(self._client.xinfo_groups, stream)
        behind = []
        for info in groups:
            pending = int(info.get("pending") or 0)
            delivered = str(info["last-delivered-id"])
            if pending or stream_id_key(delivered) < stream_id_key(last):
                behind.append(str(info["name"]))
        return sorted(behind)

    # -- stopping ----------------------------------------------------------------------------------

    async def stop_receiving(self) -> None:
        """Read nothing more; let the handlers running finish (bounded). What they do not finish
        stays pending in Redis, for another process to claim."""
        if self._stop.is_set():
            return
        self._stop.set()
        await self._wake_and_settle(list(self._readers.values()))
        await _settle(list(self._handlers), DRAIN_SECONDS)
        if self._settling:  # the acknowledgements of what they handled, which nobody awaits
            await _settle([asyncio.ensure_future(self._pipeline.drain())], DRAIN_SECONDS)

    async def _wake_and_settle(self, readers: list[_Reader]) -> None:
        """Unblock the readers until they have all returned (a reader whose read had not yet reached
        Redis misses the first ``CLIENT UNBLOCK``); cancel any still reading after a second."""
        tasks = [r.task for r in readers if r.task is not None and not r.task.done()]
        try:
            async with asyncio.timeout(1.0):
                while tasks:
                    await asyncio.gather(*(self._unblock(r) for r in readers if r.blocking))
                    done, _ = await asyncio.wait(tasks, timeout=0.02)
                    tasks = [t for t in tasks if t not in done]
        except TimeoutError:
            pass
        await _settle(tasks, 0)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.stop_receiving()
        inbox = self._inbox_reader
        if inbox is not None:
            await self._wake_and_settle([inbox])
        await _settle([t for t in (self._maintenance,) if t is not None], 0)
        await _settle(list(self._chores), 0)
        await self._pipeline.drain()
        if inbox is not None:
            try:
                await self._client.delete(self.inbox)
            except (RedisError, OSError):
                pass
        for reader in [*self._readers.values(), *([inbox] if inbox is not None else [])]:
            await _close_client(reader.client)
        await _close_client(self._client)

    # -- helpers -----------------------------------------------------------------------------------

    async def _call(self, command: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run one Redis command, turning the client's errors into the bus's own."""
        try:
            return await command(*args, **kwargs)
        except _UNREACHABLE as exc:
            raise EventBusUnavailableError(f"the event bus's Redis is unreachable: {exc}") from exc
        except RedisError as exc:
            raise EventBusError(f"the event bus's Redis refused the operation: {exc}") from exc

    def _chore(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _first(self, waiting: Awaitable[Any], *, within: float | None = None) -> None:
        """Wait for ``waiting`` or for the bus to stop, whichever comes first (at most ``within`` s)."""
        waits = {asyncio.ensure_future(waiting), asyncio.ensure_future(self._stop.wait())}
        try:
            await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()

    def _unreachable(self, exc: BaseException) -> None:
        if self._unreachable_since is None:
            self._unreachable_since = time.monotonic()
            log.warning("event bus: Redis is unreachable (%s); retrying", exc)

    def _reachable(self) -> None:
        if self._unreachable_since is not None:
            log.info(
                "event bus: Redis is reachable again after %.1fs", time.monotonic() - self._unreachable_since
            )
            self._unreachable_since = None


_TRIM_SCRIPT = """
local length = redis.call('XLEN', KEYS[1])
local soft = tonumber(ARGV[1])
if length <= soft then return 0 end
local excess = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', math.min(length - soft, tonumber(ARGV[3])))
if #excess == 0 then return 0 end
local ms, seq = string.match(excess[#excess][1], '^(%d+)-(%d+)$')
ms, seq = tonumber(ms), tonumber(seq) + 1
if ARGV[2] ~= '' then
  local bms, bseq = string.match(ARGV[2], '^(%d+)-(%d+)$')
  bms, bseq = tonumber(bms), tonumber(bseq)
  if bms < ms or (bms == ms and bseq < seq) then ms, seq = bms, bseq end
end
return redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-%d', ms, seq))
"""
"""Trim ``KEYS[1]`` to its soft length ``ARGV[1]`` but never past ``ARGV[2]``, the oldest entry id a
group still needs (empty: none is), looking at most at ``ARGV[3]`` entries."""


def _bus_error(exc: BaseException) -> BaseException:
    """The bus's error for one the client raised (what :meth:`RedisStreamsBackend._call` raises)."""
    if isinstance(exc, _UNREACHABLE):
        error: BaseException = EventBusUnavailableError(f"the event bus's Redis is unreachable: {exc}")
    elif isinstance(exc, RedisError):
        error = EventBusError(f"the event bus's Redis refused the operation: {exc}")
    else:
        return exc
    error.__cause__ = exc
    return error


def _received(fields: Mapping[str, str] | None) -> Received | None:
    """The event an entry read carries; ``None`` for one deleted meanwhile or no bus wrote (whose
    handling then reads it again, and dead-letters it with the reason)."""
    if fields is None:
        return None
    try:
        return read_event(fields)
    except ValueError:
        return None


def _successor(entry_id: str) -> str:
    ms, seq = stream_id_key(entry_id)
    return f"{ms}-{seq + 1}"


def _retry_delay(failures: int) -> float:
    return min(0.05 * 2.0 ** (failures - 1), 2.0)


async def _settle(tasks: list[asyncio.Task[Any]], within: float) -> None:
    """Let ``tasks`` finish within ``within`` seconds, then cancel and await what is left."""
    tasks = [t for t in tasks if not t.done()]
    if not tasks:
        return
    if within > 0:
        _, pending = await asyncio.wait(tasks, timeout=within)
    else:
        pending = set(tasks)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def _close_client(client: Any) -> None:
    try:
        await client.aclose()
    except (RedisError, OSError):
        pass


def _redacted(url: str) -> str:
    """``url`` without its password, fit for the dump and the logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}{port}", parts.path, parts.query, parts.fragment))
