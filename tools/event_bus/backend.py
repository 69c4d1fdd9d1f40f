"""How an event gets from ``publish`` to the subscribers of this process: the backend seam.

The bus does everything that is the same whatever carries the events — ids, causality, payload
checks, running subscribers with their context, isolation, the trace. A backend only moves
events: ``send`` hands one over, and the backend calls the ``receive`` callback it was bound to
for every event this process should deliver (its own and, for a shared broker, other processes').

A broker shared by several processes (:class:`BrokerBackend`, Redis Streams in
:mod:`tools.event_bus.redis_backend`) delivers to subscriber *groups* instead: the bus tells it
which groups subscribe to what here (``attach``, ``join``, ``changed``), and the broker asks the
bus to run one group's handlers for one event (``DeliverToGroup``), learning from the
:class:`GroupOutcome` whether to acknowledge it, retry it or give up on it, and what to reply.

``EVENT_BUS_URL`` picks the backend (:func:`tools.event_bus.factory.make_backend`); this module names
no concrete broker, so the seam does not depend on what plugs into it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .events import Event

Receive = Callable[[Event], None]


class GroupOutcome(NamedTuple):
    """How one group's handlers did with one event."""

    failures: dict[str, str]
    """Subscriber identity -> ``"Type: message"`` for each handler that raised."""
    answer: Any
    """The first value a handler returned other than ``None`` (a request's reply), else ``None``."""


DeliverToGroup = Callable[[Event, str, "frozenset[str] | None"], Awaitable["GroupOutcome | None"]]
"""``deliver(event, group, only)``: run ``group``'s handlers of ``event.name`` here (only those whose
identity is in ``only``, when given); ``None`` when the group has no such handler here."""

LocalGroups = Callable[[], dict[str, frozenset[str]]]
"""The groups with subscribers in this process, each with the event names it subscribes to."""


class EventBackend(Protocol):
    def bind(self, receive: Receive) -> None:
        """Remember where to hand every event this process must deliver."""

    async def start(self) -> None: ...

    def send(self, event: Event) -> Awaitable[None] | None:
        """Carry ``event`` towards its subscribers; an awaitable if handing it over takes I/O.

        Returning ``None`` when the hand-over is already done (in-process) saves a coroutine per
        publish; the bus awaits whatever else comes back.
        """

    def send_many(self, events: Sequence[Event]) -> Awaitable[Any] | None:
        """Carry several events at once (``publish_many``), in order: one hand-over for them all."""

    async def close(self) -> None: ...

    def describe(self) -> str: ...

    def capability(self) -> dict[str, Any]:
        """What the system dump says about the backend: at least ``backend`` and ``shared``."""


@runtime_checkable
class BrokerBackend(EventBackend, Protocol):
    """A backend shared by several processes, delivering each event once per subscriber group."""

    counters: dict[str, int]
    """What it has done in this process (delivered, retried, dead-lettered, claimed ...)."""

    def attach(self, deliver: DeliverToGroup, groups: LocalGroups) -> None: ...

    async def join(self, name: str, group: str) -> None:
        """``group`` subscribes to ``name`` (here, or once a reloaded plugin is promoted)."""

    def changed(self) -> None:
        """The subscriptions of this process changed."""

    async def request(self, event: Event, timeout: float) -> Any: ...  # noqa: ASYNC109

    async def stop_receiving(self) -> None:
        """Take no new events; let the deliveries under way finish (bounded)."""

    async def dead_letters(self, limit: int) -> list[dict[str, Any]]: ...

    async def replay_dead_letter(self, letter_id: str) -> bool: ...

    async def discard_dead_letter(self, letter_id: str) -> bool: ...

    async def lag(self) -> dict[str, dict[str, dict[str, Any]]]: ...

    def set_dedupe(self, group: str, enabled: bool) -> None: ...


class InProcessBackend:
    """Events never leave the process: ``send`` delivers straight away, in publish order."""

    def __init__(self) -> None:
        self.send: Callable[[Event], None] = self._unbound

    def bind(self, receive: Receive) -> None:
        self.send = receive  # handing an event over *is* delivering it: no call in between

    def send_many(self, events: Sequence[Event]) -> None:
        for event in events:
            self.send(event)

    @staticmethod
    def _unbound(event: Event) -> None:
        raise RuntimeError("the in-process backend was not bound to a bus")

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def describe(self) -> str:
        return "in-process"

    def capability(self) -> dict[str, Any]:
        return {"backend": "in-process", "shared": False}
