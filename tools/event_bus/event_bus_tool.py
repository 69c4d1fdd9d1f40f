"""The ``event_bus`` tool: publish/subscribe between plugins, with causality and a trace.

The contract::

    event_id = await event_bus.publish("order.paid", {"order_id": 7})     # JSON payloads only
    ids = await event_bus.publish_many("order.paid", [{"order_id": 8}, {"order_id": 9}])  # one hand-over
    await event_bus.subscribe("order.paid", self.on_paid)                 # handler(event)
    await event_bus.unsubscribe("order.paid", self.on_paid)
    answer = await event_bus.request("price.quote", {"sku": "A"}, timeout=2.0)

Choices this module makes (each is tested):

- **Handlers receive the whole** :class:`~tools.event_bus.events.Event` (``id``, ``name``,
  ``payload``, ``parent_id``, ``emitter``, ``timestamp``), so one handler can serve several names
  and see where an event came from. ``async def`` handlers run on the loop; plain ones run in a
  daemon thread of their own (with the same context), so a slow one never blocks the loop and a
  hung one never blocks the process from exiting — at the price of a thread per call, so
  high-rate subscribers should be ``async def``. A (name, handler) pair is subscribed once;
  subscribing it again changes nothing.
- **Each subscriber runs as if in its own task** (one draining task runs the subscribers that
  finish without waiting, and becomes the task of one that waits; see ``_drain``, and on Redis
  :mod:`tools.event_bus.inline_tasks`) with
  ``current_event_id_var`` set to the event's id and ``current_identity_var`` to the handler's
  identity (``<domain>.<Class>.<method>``), in its own copy of the publisher's context, so the
  publisher never sees them. So an event published by a subscriber gets ``parent_id`` = the event
  it is handling (chains are causal), log lines it writes are attributed to it, and an HTTP
  request id set by the ``http`` tool becomes the root of the chain the request starts.
- **Failures are isolated, retried, then dead-lettered** — the same rules on both backends. A
  subscriber that raises is run again after ``EVENT_BUS_RETRY_BACKOFF_MS`` (200; doubling each
  time, at most 10 s), up to ``EVENT_BUS_MAX_ATTEMPTS`` (5) runs; only the subscriber that failed
  runs again. Then its failure is logged (with its identity, the event and the traceback) and
  counted, and a dead letter kept (``dead_letters()``; in-process the newest
  ``DEAD_LETTERS_KEPT``, replay and discard as on Redis). The others still get the event and
  ``publish`` never sees it. In-process, nothing is ever redelivered (a crash loses what was in
  flight, as it loses the process), so there is nothing to de-duplicate.
- **Payloads** are JSON values, checked and deep-frozen once at ``publish``
  (:mod:`tools.event_bus.payload`): something else raises ``EventPayloadError`` and nothing is sent.
- **Ids** are unique strings: a random prefix per bus plus a counter (cheap, and unique across
  processes through the prefix), not UUIDs.
- **Request/reply**: ``request`` publishes an event and waits for the first subscriber that
  returns something other than ``None``; that value (a JSON value) is the answer. No subscriber,
  or every subscriber finishing without an answer, raises ``EventNoReplyError`` at once; no answer
  in time raises ``EventRequestTimeout`` (subscribers still running are left to finish).
- **Owners**: a subscription made while a plugin boots records that plugin
  (``current_plugin_var``); ``release_owner`` drops them all when the plugin is unloaded. A
  plugin's new version booting under a staging owner (``core.reloader``) subscribes into a
  waiting list; ``promote_owner`` then swaps the old version's subscriptions for the new ones
  with no await in between, so no event reaches both versions or neither.
- **The trace** keeps the newest ``EVENT_TRACE_BUFFER`` records (default 1000), see
  :mod:`tools.event_bus.trace`; ``trace_tree(root)`` and ``trace_stream()`` serve the system
  endpoints.

``EVENT_BUS_URL`` chooses the backend (:mod:`tools.event_bus.backend`); empty means in-process.
With ``redis://...`` several processes share the bus (:mod:`tools.event_bus.redis_backend`):

- **Groups.** ``subscribe(name, handler, group=...)`` puts the subscription in a group; by default
  the subscribing plugin (``<domain>.<Class>``). Every group receives every event; a handler that
  raises is retried and finally dead-lettered (``dead_letters()``, ``replay_dead_letter(id)``,
  ``discard_dead_letter(id)``), instead of only being logged.
- **Delivery is at least once.** An event is acknowledged only after its group's handlers
  succeeded, so after a crash (or a publish the Redis client sent twice) a handler can see an
  event again: **write handlers to be idempotent** (the event id is a good key). The bus removes
  most duplicates itself: each group remembers the event ids it handled for
  ``EVENT_BUS_DEDUP_TTL_SECONDS`` and skips a redelivered one, so a duplicate runs only when the
  crash fell between a handler's effect and its acknowledgement. ``subscribe(..., dedupe=False)``
  turns that off for the subscription's group. Entries are never trimmed before every group
  acknowledged them, except past ``EVENT_BUS_STREAM_HARD_MAXLEN``, where each drop is counted,
  logged and shown in the dump (``kernel.capabilities.event_bus.health``, with each group's lag;
  also ``await event_bus.lag()``).
- ``request`` is answered by whichever process handles the event; the trace stays per process
  (each record says which process delivered it); the dump's ``kernel.capabilities.event_bus``
  says which backend runs and whether it is shared.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Iterable
from contextvars import Context, copy_context
from time import perf_counter, time
from typing import Any

from core.base_tool import BaseTool
from core.context import current_event_id_var, current_identity_var, current_plugin_var, identity_of
from core.registry import ToolStatus
from core.reloader import is_staging
from core.settings import env_int, env_str
from core.threads import run_in_daemon_thread

from .backend import BrokerBackend, EventBackend, GroupOutcome, InProcessBackend
from .errors import EventBusError, EventNoReplyError, EventPayloadError, EventRequestTimeout
from .events import Event, Handler, Subscription, default_group
from .factory import make_backend
from .inline_tasks import carry_on, yield_once
from .payload import freeze_json, to_json
from .redis_settings import MAX_BACKOFF_MS
from .redis_wire import process_label
from .trace import Outcome, TraceListener, TraceLog, TraceRecord

log = logging.getLogger("keel.event_bus")

DEFAULT_TRACE_BUFFER = 1000
DRAIN_SECONDS = 5.0
DEAD_LETTERS_KEPT = 1000

_event_var = current_event_id_var
_identity_var = current_identity_var
_get_running_loop = asyncio.get_running_loop
_current_task = asyncio.current_task
_copy_context = copy_context
_new_record = object.__new__
_new_event = tuple.__new__  # Event(...) without the generated __new__'s argument handling
_OK = Outcome.OK  # enum member lookups cost more than a global on every delivery
# name -> (subscriptions, their identities, how many): the count saves two len() per event.
_Table = tuple[tuple[Subscription, ...], list[str], int]
_NO_SUBSCRIBERS: _Table = ((), [], 0)
_NO_FAILURES: dict[str, str] = {}  # shared by every outcome without one: never mutated


class EventBusTool(BaseTool):
    """Publish/subscribe with causal parent ids, subscriber identity, request/reply and a trace."""

    name = "event_bus"

    def __init__(self) -> None:
        self._backend: EventBackend = InProcessBackend()
        self._backend.bind(self._receive)
        self._local = True  # in-process backend: ``publish`` does what ``_receive`` does itself
        self._broker: BrokerBackend | None = None  # the backend, when several processes share it
        self._trace = TraceLog(DEFAULT_TRACE_BUFFER)
        # name -> (subscriptions, their identities); replaced, never mutated, so a delivery
        # in progress keeps the tuple it started with.
        self._subscribers: dict[str, _Table] = {}
        # For a broker: (name, group) -> that group's subscriptions of name here, and their
        # identities; emptied whenever the table changes (``_set``).
        self._group_tables: dict[tuple[str, str], tuple[list[Subscription], list[str]]] = {}
        self._staged: dict[str, list[Subscription]] = {}  # staging owner -> subscriptions waiting
        self._replies: dict[str, asyncio.Future[Any]] = {}
        # Deliveries in flight, held here so no task is collected while it runs, each dropped by
        # its own ``finally``. Keyed by what the delivery knows (``_delivery_key``), because a
        # task finding itself (``asyncio.current_task``) costs a Python call per delivery.
        self._tasks: dict[object, asyncio.Task[Any]] = {}
        # In-process: events published and not yet handed to their subscribers (event, record,
        # subscriptions, publisher's context, first subscriber), and the task draining them.
        self._queue: deque[tuple[Event, TraceRecord, tuple[Subscription, ...], Context, int]] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self._prefix = uuid.uuid4().hex[:12] + "-"
        self.published = 0  # also the number in the next event's id
        self.failed_deliveries = 0
        self.retried = 0
        self.max_attempts = 5
        self.retry_backoff_ms = 200
        self._dead: deque[dict[str, Any]] = deque(maxlen=DEAD_LETTERS_KEPT)  # in-process letters
        self._dead_count = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    async def health_check(self) -> bool:
        """Whether the broker answers (Redis ``PING``); the in-process bus is always healthy."""
        ping = getattr(self._backend, "ping", None)
        return True if ping is None else bool(await ping())

    async def setup(self) -> None:
        self.max_attempts = env_int("EVENT_BUS_MAX_ATTEMPTS", 5, minimum=1)
        self.retry_backoff_ms = env_int("EVENT_BUS_RETRY_BACKOFF_MS", 200, minimum=0)
        self._backend = make_backend(env_str("EVENT_BUS_URL"))
        self._backend.bind(self._receive)
        self._broker = self._backend if isinstance(self._backend, BrokerBackend) else None
        self._local = type(self._backend) is InProcessBackend
        if self._broker is not None:
            self._broker.attach(self._deliver_group, self._local_groups)
        self._trace = TraceLog(env_int("EVENT_TRACE_BUFFER", DEFAULT_TRACE_BUFFER, minimum=1))
        registry = getattr(self, "kernel_registry", None)
        if registry is not None:
            registry.set_capability(self.name, self._backend.capability())
        await self._backend.start()
        if registry is not None:
            registry.update_tool_status(self.name, ToolStatus.OK, self._backend.describe())

    async def shutdown(self) -> None:
        """Let deliveries in flight finish (bounded), cancel the rest, close the backend."""
        if self._broker is not None:
            await self._broker.stop_receiving()
        deadline = asyncio.get_running_loop().time() + DRAIN_SECONDS
        while True:  # again while draining queued events starts new deliveries
            tasks = set(self._tasks.values())
            if self._drainer is not None:
                tasks.add(self._drainer)
            if not tasks:
                break
            left = max(0.0, deadline - asyncio.get_running_loop().time())
            _, pending = await asyncio.wait(tasks, timeout=left)
            if pending:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
        await self._backend.close()

    def release_owner(self, owner: str) -> None:
        """Forget every subscription made by plugin ``owner``."""
        self._staged.pop(owner, None)
        for name, (subscriptions, _, _) in list(self._subscribers.items()):
            kept = tuple(s for s in subscriptions if s.owner != owner)
            if len(kept) != len(subscriptions):
                self._set(name, kept)

    def promote_owner(self, staged: str, owner: str) -> None:
        """Replace ``owner``'s subscriptions with those made under ``staged``, in one step."""
        incoming: dict[str, list[Subscription]] = {}
        for subscription in self._staged.pop(staged, []):
            subscription.owner = owner
            incoming.setdefault(subscription.name, []).append(subscription)
        for name in set(self._subscribers) | set(incoming):
            subscriptions = self._subscribers.get(name, _NO_SUBSCRIBERS)[0]
            kept = tuple(s for s in subscriptions if s.owner != owner)
            if len(kept) != len(subscriptions) or name in incoming:
                self._set(name, (*kept, *incoming.get(name, ())))

    # -- publishing --------------------------------------------------------------------------------

    async def publish(self, name: str, payload: Any = None) -> str:
        """Send an event to every subscriber of ``name``; return its id at once."""
        # What ``_event`` does (``_require_name`` included), inlined: this is the bus's hottest path.
        if type(name) is not str or not name:
            raise EventBusError(f"an event name is a non-empty string, got {name!r}")
        frozen = freeze_json(payload)
        self.published = number = self.published + 1
        event_id = f"{self._prefix}{number}"
        event = _new_event(Event, (event_id, name, frozen, _event_var.get(), _identity_var.get(), time()))
        if not self._local:
            handing_over = self._backend.send(event)
            if handing_over is not None:
                await handing_over
            return event_id
        # In-process, handing over is receiving: what ``_receive`` does, without the call.
        subscriptions, identities, count = self._subscribers.get(name, _NO_SUBSCRIBERS)
        if not count:
            self._trace.open(event, identities)
            self._unanswered(event)
            return event_id
        record = _new_record(TraceRecord)
        record.event = event
        record.subscribers = identities
        record.results = [None] * count
        record.pending = count
        record.started = perf_counter()
        record.seq = 0
        self._trace.keep(record)
        self._queue.append((event, record, subscriptions, _copy_context(), 0))
        if self._drainer is None:
            self._drainer = _get_running_loop().create_task(self._drain())
        return event_id

    async def publish_many(self, name: str, payloads: Iterable[Any]) -> list[str]:
        """Publish an event named ``name`` per payload, in order, handed over together; return their ids.

        On Redis that is one round trip and one wake-up for them all, where ``gather``-ing as many
        ``publish`` calls costs a task each. Every payload is checked before anything is sent, so a
        bad one raises ``EventPayloadError`` and none is published. If Redis fails part-way
        (``EventBusUnavailableError``), some may have been stored, as with that many ``publish`` calls.
        """
        _require_name(name)
        frozen = [freeze_json(payload) for payload in payloads]
        parent, emitter, now, first = _event_var.get(), _identity_var.get(), time(), self.published + 1
        self.published += len(frozen)
        events = [
            _new_event(Event, (f"{self._prefix}{first + i}", name, value, parent, emitter, now))
            for i, value in enumerate(frozen)
        ]
        handing_over = self._backend.send_many(events)
        if handing_over is not None:
            await handing_over
        return [event.id for event in events]

    async def request(self, name: str, payload: Any = None, timeout: float = 5.0) -> Any:  # noqa: ASYNC109
        """Publish and wait for the first subscriber that returns a value; return that value."""
        event = self._event(name, payload)
        if self._broker is not None:
            return await self._broker.request(event, timeout)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[event.id] = answer
        try:
            handing_over = self._backend.send(event)
            if handing_over is not None:
                await handing_over
            async with asyncio.timeout(timeout):
                return await answer
        except TimeoutError:
            raise EventRequestTimeout(f"no reply to {name!r} within {timeout:g}s") from None
        finally:
            self._replies.pop(event.id, None)

    def _event(self, name: str, payload: Any) -> Event:
        _require_name(name)
        frozen = freeze_json(payload)
        self.published = number = self.published + 1
        return _new_event(
            Event, (f"{self._prefix}{number}", name, frozen, _event_var.get(), _identity_var.get(), time())
        )

    # -- subscribing -------------------------------------------------------------------------------

    async def subscribe(
        self, name: str, handler: Handler, *, group: str | None = None, dedupe: bool = True
    ) -> None:
        """Call ``handler(event)`` for every event named ``name`` from now on (``group``, ``dedupe``:
        see above)."""
        _require_name(name)
        if not callable(handler):
            raise EventBusError(f"a subscriber must be callable, got {handler!r}")
        if group is not None and (type(group) is not str or not group):
            raise EventBusError(f"a subscriber group is a non-empty string, got {group!r}")
        owner = current_plugin_var.get()
        group = group or default_group(owner, handler)
        if owner is not None and is_staging(owner):
            waiting = self._staged.setdefault(owner, [])
            if not any(s.name == name and s.handler == handler for s in waiting):
                waiting.append(Subscription(name, handler, identity_of(handler), owner, group))
        else:
            subscriptions = self._subscribers.get(name, _NO_SUBSCRIBERS)[0]
            if any(s.handler == handler for s in subscriptions):
                return
            subscription = Subscription(name, handler, identity_of(handler), owner, group)
            self._set(name, (*subscriptions, subscription))
        if self._broker is not None:
            if not dedupe:
                self._broker.set_dedupe(group, False)
            await self._broker.join(name, group)

    async def unsubscribe(self, name: str, handler: Handler) -> bool:
        """Stop calling ``handler`` for ``name``; False if it was not subscribed."""
        for waiting in self._staged.values():
            waiting[:] = [s for s in waiting if not (s.name == name and s.handler == handler)]
        subscriptions = self._subscribers.get(name, _NO_SUBSCRIBERS)[0]
        kept = tuple(s for s in subscriptions if s.handler != handler)
        self._set(name, kept)
        return len(kept) != len(subscriptions)

    def _set(self, name: str, subscriptions: tuple[Subscription, ...]) -> None:
        self._group_tables.clear()
        if subscriptions:
            self._subscribers[name] = (subscriptions, [s.identity for s in subscriptions], len(subscriptions))
        else:
            self._subscribers.pop(name, None)
        if self._broker is not None:
            self._broker.changed()

    def _local_groups(self) -> dict[str, frozenset[str]]:
        """For a broker: each group with subscribers here, and the event names it subscribes to."""
        groups: dict[str, set[str]] = {}
        for name, (subscriptions, _, _) in self._subscribers.items():
            for subscription in subscriptions:
                groups.setdefault(subscription.group, set()).add(name)
        return {group: frozenset(names) for group, names in groups.items()}

    def subscriptions(self) -> list[dict[str, Any]]:
        """Every subscription with its owner and its delivered/failed counters."""
        return [s.snapshot() for subs, _, _ in self._subscribers.values() for s in subs]

    # -- delivering --------------------------------------------------------------------------------

    def _receive(self, event: Event) -> None:
        subscriptions, identities, count = self._subscribers.get(event.name, _NO_SUBSCRIBERS)
        if not count:
            self._trace.open(event, identities)
            self._unanswered(event)
            return
        # TraceRecord(event, identities), without the class call: this runs for every event
        # (``publish`` repeats this for the in-process backend; change both together).
        record = _new_record(TraceRecord)
        record.event = event
        record.subscribers = identities
        record.results = [None] * count
        record.pending = count
        record.started = perf_counter()
        record.seq = 0
        self._trace.keep(record)
        # Queued with a copy of the publisher's context, for the drainer (below) to deliver.
        self._queue.append((event, record, subscriptions, _copy_context(), 0))
        if self._drainer is None:
            self._drainer = _get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Deliver the queued events, in publish order, one task for all of them.

        A task per subscriber per event would cost the loop a task and a scheduled step each;
        most subscribers finish without ever waiting, so this task runs each one's coroutine
        itself, in the subscriber's own copy of the publisher's context. When one waits, this task
        hands the rest of the queue to a new drainer and becomes that subscriber's task
        (:func:`~tools.event_bus.inline_tasks.carry_on`), so a slow subscriber never holds up the
        others and every delivery runs in a single task from its start to its end (which
        ``asyncio.current_task()`` users — timeouts, task groups, the db tool's transactions — rely
        on). Each pass takes only what was queued when it began, so subscribers publishing in turn
        cannot starve the loop. The Redis backend runs its deliveries the same way, through
        :class:`~tools.event_bus.inline_tasks.InlineTasks`.
        """
        queue = self._queue
        deliver = self._deliver
        me = _current_task()
        try:
            while queue:
                for _ in range(len(queue)):
                    event, record, subscriptions, context, index = queue.popleft()
                    last = len(subscriptions) - 1
                    while True:  # index .. last; not a range(), which costs an object per event
                        own = context if index == last else context.copy()
                        coro = deliver(subscriptions[index], event, record, index)
                        try:
                            waiting = own.run(coro.send, None)
                        except StopIteration:
                            if index == last:
                                break
                            index += 1
                            continue
                        except (KeyboardInterrupt, SystemExit):
                            raise
                        except BaseException:  # cancelled itself; recorded by _deliver
                            if index == last:
                                break
                            index += 1
                            continue
                        # It waits: the rest goes to a new drainer, and this task carries it on.
                        if index < last:
                            queue.appendleft((event, record, subscriptions, context, index + 1))
                        self._drainer = _get_running_loop().create_task(self._drain()) if queue else None
                        self._tasks[_delivery_key(record, index)] = me  # type: ignore[assignment]
                        await carry_on(coro, own, waiting)
                        return
                if queue:
                    await yield_once()
        finally:
            if self._drainer is me:
                self._drainer = None

    async def _deliver(
        self,
        subscription: Subscription,
        event: Event,
        record: TraceRecord,
        index: int,
        *,
        inline: bool = False,
    ) -> Any:
        """Run one subscriber on one event; return what it returned (``None`` if it raised).

        Sets the context variables for the subscriber and leaves them set: this runs as a task
        of its own, whose context copy ends with it. A caller awaiting it ``inline`` has set them
        itself (to reset them after), and they are not set twice.
        """
        if not inline:
            _event_var.set(event.id)
            _identity_var.set(subscription.identity)
        started = perf_counter()
        outcome, error, result = _OK, None, None
        try:
            try:
                if subscription.is_async:
                    result = await subscription.handler(event)
                else:
                    result = await run_in_daemon_thread(subscription.handler, event)
                    if asyncio.iscoroutine(result):
                        result = await result
            except Exception as first:
                if self._broker is not None or self.max_attempts <= 1:
                    raise  # a broker retries the group itself
                result = await self._retry(subscription, event, first)
            if result is not None and self._replies:
                self._answer(event, result)
        except Exception as exc:
            outcome, error = Outcome.ERROR, f"{type(exc).__name__}: {exc}"
            subscription.failed += 1
            self.failed_deliveries += 1
            if self._broker is None:
                self._dead_letter(subscription, event, error)
            log.error(
                "subscriber %s failed on %s (event %s): %s",
                subscription.identity,
                event.name,
                event.id,
                error,
                exc_info=exc,
                extra={"event_id": event.id, "event_name": event.name, "subscriber": subscription.identity},
            )
        except BaseException:
            outcome = Outcome.CANCELLED
            raise
        finally:
            now = perf_counter()
            record.results[index] = (outcome, error, now - started)
            record.pending = pending = record.pending - 1
            if not pending:
                trace = self._trace
                if trace.listeners:
                    trace.complete(record, now)
                else:  # what complete() does without listeners, minus the call
                    record.finished = now
                    trace.seq = record.seq = trace.seq + 1
                if self._replies:
                    self._unanswered(event)
            if self._tasks:  # empty while every subscriber finishes without waiting
                self._tasks.pop(record if index == 0 else (record, index), None)  # _delivery_key
        return result

    async def _retry(self, subscription: Subscription, event: Event, failure: Exception) -> Any:
        """In-process: run a failed subscriber again with backoff; its result, or its last error."""
        for attempt in range(1, self.max_attempts):
            self.retried += 1
            log.warning(
                "subscriber %s failed on %s (event %s, attempt %d of %d): %s: %s; retrying",
                subscription.identity,
                event.name,
                event.id,
                attempt,
                self.max_attempts,
                type(failure).__name__,
                failure,
                extra={"event_id": event.id, "event_name": event.name, "subscriber": subscription.identity},
            )
            await asyncio.sleep(min(self.retry_backoff_ms * 2.0 ** (attempt - 1), MAX_BACKOFF_MS) / 1000)
            try:
                if subscription.is_async:
                    return await subscription.handler(event)
                result = await run_in_daemon_thread(subscription.handler, event)
                return await result if asyncio.iscoroutine(result) else result
            except Exception as exc:
                failure = exc
        raise failure

    def _dead_letter(self, subscription: Subscription, event: Event, error: str) -> None:
        """In-process: keep a dead letter shaped like the Redis bus's."""
        self._dead_count += 1
        self._dead.append(
            {
                "dead_letter_id": f"{self._prefix}dead-{self._dead_count}",
                "id": event.id,
                "name": event.name,
                "payload": json.loads(to_json(event.payload)),
                "parent": event.parent_id,
                "emitter": event.emitter,
                "ts": event.timestamp,
                "group": subscription.group,
                "error": f"{subscription.identity}: {error}",
                "failures": {subscription.identity: error},
                "attempts": self.max_attempts,
                "failed_at": time(),
                "consumer": process_label(),
            }
        )

    def _replay(self, letter: dict[str, Any]) -> None:
        """In-process: deliver a dead letter's event again to the subscribers that gave up on it."""
        event = _new_event(
            Event,
            (
                letter["id"],
                letter["name"],
                freeze_json(letter["payload"]),
                letter["parent"],
                letter["emitter"],
                letter["ts"],
            ),
        )
        chosen = [
            s
            for s in self._subscribers.get(event.name, _NO_SUBSCRIBERS)[0]
            if s.group == letter["group"] and s.identity in letter["failures"]
        ]
        record = TraceRecord(event, [s.identity for s in chosen])
        self._trace.keep(record)
        create_task = asyncio.get_running_loop().create_task
        for index, subscription in enumerate(chosen):
            self._tasks[_delivery_key(record, index)] = create_task(
                self._deliver(subscription, event, record, index)
            )

    async def _deliver_group(
        self, event: Event, group: str, only: frozenset[str] | None
    ) -> GroupOutcome | None:
        """For a broker: run ``group``'s subscribers of ``event`` here (those in ``only``, if given)
        and report which failed and the first answer; ``None`` if the group has none here."""
        table = self._group_tables.get((event.name, group))
        if table is None:
            everyone = self._subscribers.get(event.name, _NO_SUBSCRIBERS)[0]
            chosen = [s for s in everyone if s.group == group]
            table = self._group_tables[(event.name, group)] = (chosen, [s.identity for s in chosen])
        chosen, identities = table
        if only is not None:  # a retry: those that failed
            chosen = [s for s in chosen if s.identity in only]
            identities = [s.identity for s in chosen]
        if not chosen:
            return None
        record = TraceRecord(event, identities)
        self._trace.keep(record)
        if len(chosen) == 1:
            # Awaited in this task, so the context variables _deliver sets are put back after.
            event_token = _event_var.set(event.id)
            identity_token = _identity_var.set(chosen[0].identity)
            try:
                answer = await self._deliver(chosen[0], event, record, 0, inline=True)
            finally:
                _identity_var.reset(identity_token)
                _event_var.reset(event_token)
            result = record.results[0]
            if result is not None and result[0] is _OK:
                return GroupOutcome(_NO_FAILURES, answer)
            return GroupOutcome({identities[0]: (result and result[1]) or "failed"}, answer)
        create_task = asyncio.get_running_loop().create_task
        tasks = [create_task(self._deliver(s, event, record, i)) for i, s in enumerate(chosen)]
        self._tasks.update((_delivery_key(record, i), task) for i, task in enumerate(tasks))
        answers = await asyncio.gather(*tasks)
        failures = {
            identities[i]: result[1] or "failed"
            for i, result in enumerate(record.results)
            if result is not None and result[0] is not _OK
        }
        return GroupOutcome(failures, next((a for a in answers if a is not None), None))

    def _answer(self, event: Event, result: Any) -> None:
        waiting = self._replies.get(event.id)
        if waiting is None or waiting.done():
            return
        try:
            waiting.set_result(freeze_json(result, what="reply"))
        except EventPayloadError as exc:
            waiting.set_exception(exc)

    def _unanswered(self, event: Event) -> None:
        waiting = self._replies.get(event.id)
        if waiting is not None and not waiting.done():
            subscribers = self._subscribers.get(event.name, _NO_SUBSCRIBERS)[0]
            reason = "every subscriber finished without a reply" if subscribers else "nobody subscribes to it"
            waiting.set_exception(EventNoReplyError(f"no reply to {event.name!r}: {reason}"))

    # -- the trace ---------------------------------------------------------------------------------

    def trace_records(self) -> list[dict[str, Any]]:
        """The buffered trace records, oldest first."""
        return self._trace.records()

    def trace_tree(self, root: str) -> dict[str, Any] | None:
        """The causal tree under ``root`` (an event id or an HTTP request id), or None."""
        return self._trace.tree(root)

    async def trace_stream(self, after: int | None = None) -> AsyncGenerator[dict[str, Any], None]:
        """Trace records as they complete (first any completed after sequence number ``after``)."""
        async for record in self._trace.stream(after):
            yield record

    def add_trace_listener(self, listener: TraceListener) -> None:
        """Call ``listener(record)`` synchronously each time a record completes."""
        self._trace.add_listener(listener)

    def remove_trace_listener(self, listener: TraceListener) -> None:
        self._trace.remove_listener(listener)

    async def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` events a group gave up on, newest first."""
        if self._broker is None:
            return [dict(letter) for letter in reversed(self._dead)][:limit]
        return await self._broker.dead_letters(limit)

    async def replay_dead_letter(self, letter_id: str) -> bool:
        """Deliver a dead letter's event again to the group that gave up on it, and remove the letter.

        False when there is no such letter (already replayed or discarded)."""
        if self._broker is None:
            letter = self._take_letter(letter_id)
            if letter is not None:
                self._replay(letter)
            return letter is not None
        return await self._broker.replay_dead_letter(letter_id)

    async def discard_dead_letter(self, letter_id: str) -> bool:
        """Delete a dead letter; False when there is no such letter."""
        if self._broker is None:
            return self._take_letter(letter_id) is not None
        return await self._broker.discard_dead_letter(letter_id)

    def _take_letter(self, letter_id: str) -> dict[str, Any] | None:
        for letter in self._dead:
            if letter["dead_letter_id"] == letter_id:
                self._dead.remove(letter)
                return letter
        return None

    async def lag(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per event name and group: ``pending`` (being handled or retried, not yet done) and
        ``unread`` (waiting in the stream; always 0 in-process, where delivery starts at publish)."""
        if self._broker is not None:
            return await self._broker.lag()
        report: dict[str, dict[str, dict[str, Any]]] = {}
        for name, (subscriptions, _, _) in self._subscribers.items():
            for subscription in subscriptions:
                report.setdefault(name, {})[subscription.group] = {"pending": 0, "unread": 0}
        groups = {(s.name, s.identity): s.group for subs, _, _ in self._subscribers.values() for s in subs}
        for key in list(self._tasks):
            record, index = key if isinstance(key, tuple) else (key, 0)
            if not isinstance(record, TraceRecord) or record.results[index] is not None:
                continue
            group = groups.get((record.event.name, record.subscribers[index]))
            if group is not None:
                report[record.event.name][group]["pending"] += 1
        return report

    def stats(self) -> dict[str, Any]:
        """Counters for the dump: events published, failed deliveries, deliveries in flight."""
        return {
            "backend": self._backend.describe(),
            "published": self.published,
            "failed_deliveries": self.failed_deliveries,
            "retried": self.retried,
            "dead_letters": len(self._dead) if self._broker is None else None,
            "in_flight": len(self._tasks),
            "trace_buffer": self._trace.size,
            **({"broker": dict(self._broker.counters)} if self._broker is not None else {}),
        }


def _delivery_key(record: TraceRecord, index: int) -> object:
    """The key of a delivery in flight: its record alone for the first (or only) subscriber, which
    spares the common case a tuple, else (record, index)."""
    return record if index == 0 else (record, index)


def _require_name(name: object) -> None:
    if type(name) is not str or not name:
        raise EventBusError(f"an event name is a non-empty string, got {name!r}")
