"""The agents a service offers: a small registry the agents domain owns, one per kernel.

A plugin of the agents domain builds a ``core.agents.Agent`` (from the injected ``llm`` and its own
tools) and declares it here; the runs API looks agents up by name. The catalog of a kernel is
reached through that kernel's container (``catalog_for(container)``), so two kernels in one
process (a test suite, a restart) never share agents, and a plugin needs nothing but the
``container`` it can already have injected.

When auth is on, running an agent needs a bearer token; ``declare(..., public=True)`` opens one
agent to anonymous callers on purpose (their runs have no owner: whoever holds the run id may
follow it).

Rules: a name belongs to the plugin that declared it (``current_plugin_var`` at the time); the same
plugin declaring it again replaces it (a reload), another plugin declaring it is a ``ValueError``
naming both. ``withdraw`` forgets it (call it from ``on_shutdown``). ``wait_for`` lets a run that is
resumed at boot wait, within a bound, for the plugin that declares its agent to finish booting.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from core.agents import Agent, ReActCognition
from core.context import current_plugin_var
from core.contracts.ports import LLMPort


@dataclass(frozen=True)
class AgentSpec:
    """A declared agent: the agent itself, the model port its runs call, and who declared it."""

    agent: Agent
    llm: LLMPort
    description: str = ""
    owner: str | None = None
    public: bool = False

    def view(self) -> dict[str, Any]:
        cognition = self.agent.cognition
        tools = [tool.name for tool in cognition.tools] if isinstance(cognition, ReActCognition) else []
        return {
            "name": self.agent.name,
            "model": self.agent.model,
            "description": self.description,
            "cognition": type(cognition).__name__,
            "tools": tools,
            "declared_by": self.owner,
            "public": self.public,
        }


class AgentCatalog:
    def __init__(self) -> None:
        self._specs: dict[str, AgentSpec] = {}
        self._lock = threading.Lock()  # a plugin's plain on_boot declares from a worker thread
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    def declare(self, agent: Agent, *, llm: LLMPort, description: str = "", public: bool = False) -> None:
        """Offer ``agent`` under its name; its runs call ``llm``; ``public`` runs need no token."""
        owner = current_plugin_var.get()
        with self._lock:
            existing = self._specs.get(agent.name)
            if existing is not None and existing.owner != owner:
                raise ValueError(
                    f"agent {agent.name!r} is already declared by {existing.owner or 'another caller'}; "
                    f"{owner or 'this caller'} cannot declare it too"
                )
            self._specs[agent.name] = AgentSpec(agent, llm, description, owner, public)
            waiters = self._waiters.pop(agent.name, [])
        for loop, waiter in waiters:
            try:
                loop.call_soon_threadsafe(_wake, waiter)
            except RuntimeError:
                pass  # that loop has closed: nobody is waiting there any more

    def withdraw(self, name: str) -> None:
        with self._lock:
            self._specs.pop(name, None)

    def get(self, name: str) -> AgentSpec | None:
        return self._specs.get(name)

    def specs(self) -> list[AgentSpec]:
        with self._lock:
            return [self._specs[name] for name in sorted(self._specs)]

    async def wait_for(self, name: str, within: float) -> AgentSpec | None:
        """The agent once it is declared, or ``None`` if it is not within ``within`` seconds."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (loop, waiter)
        with self._lock:
            spec = self._specs.get(name)
            if spec is not None:
                return spec
            self._waiters.setdefault(name, []).append(entry)
        try:
            async with asyncio.timeout(within):
                await waiter
        except TimeoutError:
            return None
        finally:
            with self._lock:
                waiting = self._waiters.get(name, [])
                if entry in waiting:
                    waiting.remove(entry)
        return self._specs.get(name)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_CATALOGS: weakref.WeakKeyDictionary[Any, AgentCatalog] = weakref.WeakKeyDictionary()


def catalog_for(container: Any) -> AgentCatalog:
    """The catalog of the kernel that owns ``container``."""
    catalog = _CATALOGS.get(container)
    if catalog is None:
        catalog = _CATALOGS[container] = AgentCatalog()
    return catalog
