"""How an event gets from ``publish`` to the subscribers of this process: the backend seam.

The bus does everything that is the same whatever carries the events — ids, causality, payload
checks, running subscribers with their context, isolation, the trace. A backend only moves
events: ``send`` hands one over, and the backend calls the ``receive`` callback it was bound to
for every event this process should deliver (its own and, for a shared broker, other processes').

Only the in-process backend exists today; ``EVENT_BUS_URL`` picks the backend, so a broker-based
one (Redis Streams, say) is a new class here and a new scheme in :func:`make_backend`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from .events import Event

Receive = Callable[[Event], None]


class EventBackend(Protocol):
    def bind(self, receive: Receive) -> None:
        """Remember where to hand every event this process must deliver."""

    async def start(self) -> None: ...

    def send(self, event: Event) -> Awaitable[None] | None:
        """Carry ``event`` towards its subscribers; an awaitable if handing it over takes I/O.

        Returning ``None`` when the hand-over is already done (in-process) saves a coroutine per
        publish; the bus awaits whatever else comes back.
        """

    async def close(self) -> None: ...

    def describe(self) -> str: ...


class InProcessBackend:
    """Events never leave the process: ``send`` delivers straight away, in publish order."""

    def __init__(self) -> None:
        self.send: Callable[[Event], None] = self._unbound

    def bind(self, receive: Receive) -> None:
        self.send = receive  # handing an event over *is* delivering it: no call in between

    @staticmethod
    def _unbound(event: Event) -> None:
        raise RuntimeError("the in-process backend was not bound to a bus")

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def describe(self) -> str:
        return "in-process"


def make_backend(url: str) -> EventBackend:
    """The backend ``EVENT_BUS_URL`` names; empty or ``memory://`` is the in-process one."""
    scheme = url.strip().partition("://")[0].lower()
    if scheme in ("", "memory"):
        return InProcessBackend()
    raise ValueError(
        f"EVENT_BUS_URL scheme {scheme!r} is not supported yet; leave it empty (or memory://) "
        "for the in-process bus"
    )
