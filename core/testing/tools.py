"""``FakeTool``: a ``ToolPort`` whose answer is fixed by the test, and which records every call.

``responder`` decides the result: a callable is called with a plain copy of the arguments (and
awaited if it returns an awaitable); an exception instance is raised, which is how a test makes a
tool fail; any other value (a dict, a string, ``None``) is returned as is, a dict as a fresh copy.
``.calls`` holds a deep, editable copy of each call's arguments, in order, so what the tool received
can be compared with plain dicts and cannot be changed by the code under test afterwards.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from core.contracts.protocols import Ctx
from core.contracts.types import ToolSchema
from core.serialization import thaw

__all__ = ["FakeTool"]

_OPEN_OBJECT: Mapping[str, Any] = {"type": "object"}


class FakeTool:
    """A tool named ``name`` that answers with ``responder`` and records its calls."""

    def __init__(
        self,
        name: str,
        responder: Any = None,
        *,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        side_effecting: bool = False,
    ) -> None:
        self._name = name
        self._responder = responder
        self._schema = ToolSchema(
            name, description or f"fake tool {name}", parameters if parameters is not None else _OPEN_OBJECT
        )
        self.side_effecting = side_effecting
        self.calls: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    async def run(self, args: Mapping[str, Any], ctx: Ctx) -> Any:
        self.calls.append(thaw(dict(args)))
        responder = self._responder
        if isinstance(responder, BaseException):
            raise responder
        if callable(responder):
            result = responder(thaw(dict(args)))
            if inspect.isawaitable(result):
                result = await result
            return result
        return thaw(responder)

    def __repr__(self) -> str:
        return f"FakeTool({self._name!r}, calls={len(self.calls)})"
