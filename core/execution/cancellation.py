"""Cooperative cancellation: a token a run tree shares, and the error a loop raises when it is set.

A :class:`CancellationToken` is a request to stop, not a forced stop. Whoever owns a run calls
:meth:`~CancellationToken.cancel`; the code doing the work checks the token at points where stopping
is safe (:meth:`~CancellationToken.raise_if_cancelled`) or waits for it (:meth:`~CancellationToken.wait`).
Tokens form a tree: cancelling a token cancels every child made from it, never its parent.

:class:`Cancelled` is a :class:`~core.contracts.errors.KeelError` and deliberately *not* an
``asyncio.CancelledError``. Task cancellation belongs to the event loop (a timeout, a shutdown) and
must always propagate; a cancelled token is an application decision that a caller may catch and
report like any other typed outcome. Keeping the two types apart means an ``except Cancelled`` can
never swallow a task cancellation, and ``except asyncio.CancelledError`` never sees a token.
A :class:`Cancelled` declares itself ``permanent``: retrying work that was told to stop is pointless.

A token may be cancelled from any thread, and awaited from any event loop (``run_sync`` runs
coroutines on a worker thread's loop): waiters are woken through their own loop.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

from core.contracts.errors import ErrorClass, KeelError

__all__ = ["CancellationToken", "Cancelled"]


class Cancelled(KeelError):
    """Raised by :meth:`CancellationToken.raise_if_cancelled` once the token is cancelled."""

    error_class: ErrorClass = ErrorClass.PERMANENT

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(f"cancelled: {reason}" if reason else "cancelled")
        self.reason = reason


class CancellationToken:
    """A cooperative stop signal shared down a run tree.

    ``cancel`` is idempotent and the first reason given wins. A child made from a token that is already
    cancelled starts cancelled, with its parent's reason.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._reason: str | None = None
        self._children: weakref.WeakSet[CancellationToken] = weakref.WeakSet()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called on this token or an ancestor."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """The reason given to the first :meth:`cancel`, if any."""
        return self._reason

    def child(self) -> CancellationToken:
        """A new token that this token's cancellation reaches, but whose own cancellation stays local."""
        child = CancellationToken()
        with self._lock:
            if not self._cancelled:
                self._children.add(child)
                return child
            reason = self._reason
        child.cancel(reason)
        return child

    def cancel(self, reason: str | None = None) -> None:
        """Cancel this token and every descendant, waking everything waiting on them."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            self._reason = reason
            children = list(self._children)
            self._children = weakref.WeakSet()
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            try:
                loop.call_soon_threadsafe(_wake, waiter)
            except RuntimeError:
                # The waiter's loop is closed; nothing is left there to wake.
                pass
        for child in children:
            child.cancel(reason)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`Cancelled` if the token is cancelled; a safe point in a loop calls this."""
        if self._cancelled:
            raise Cancelled(self._reason)

    async def wait(self) -> None:
        """Return once the token is cancelled (immediately if it already is)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (loop, waiter)
        with self._lock:
            if self._cancelled:
                return
            self._waiters.append(entry)
        try:
            await waiter
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)

    def __repr__(self) -> str:
        state = f"cancelled, reason={self._reason!r}" if self._cancelled else "active"
        return f"<CancellationToken {state}>"


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
