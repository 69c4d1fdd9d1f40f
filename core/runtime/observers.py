"""Observer adapters that ship with the runtime.

``CollectingObserver`` keeps every observation in memory, in arrival order: the sink for a test, a
CLI that prints a run's steps at the end, or a small service that returns them with the result.
After ``close()`` it refuses further observations, so a run that keeps emitting after its owner
finished with it is visible instead of silently growing a list nobody reads.
"""

from __future__ import annotations

from core.contracts.errors import KeelError
from core.contracts.ports import Observation

__all__ = ["CollectingObserver", "ObserverClosed"]


class ObserverClosed(KeelError):
    """An observation arrived after the observer was closed."""


class CollectingObserver:
    """An ``ObserverPort`` that keeps every observation in ``.items``."""

    def __init__(self) -> None:
        self.items: list[Observation] = []
        self.closed = False

    async def emit(self, observation: Observation) -> None:
        if self.closed:
            raise ObserverClosed(f"observation {observation.kind!r} arrived after close()")
        self.items.append(observation)

    async def close(self) -> None:
        self.closed = True

    def kinds(self) -> list[str]:
        """The kinds of the collected observations, in order."""
        return [item.kind for item in self.items]
