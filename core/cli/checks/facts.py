"""What ``keel check`` needs from the project's tools, found the way the kernel finds tools.

``core`` never imports a tool statically: the tool files are imported from the root by the kernel's
own discovery (``Kernel._tool_classes``, the pass that picks the event loop, which constructs
nothing and sets nothing up), and each class gives its ``name`` and which of its public methods are
coroutine functions (the same members ``core.tool_ports`` declares ``async``, a match
``tests/core/test_tool_ports.py`` holds every tool to). A tool file that fails to import is left
out here; boot reports it. The ``/system`` rule is read from the http tool's own ``route_order``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from core.cli.checks.findings import Facts
from core.cli.project import tool_module


def gather(root: Path) -> Facts:
    from core.kernel import RESERVED_PARAMETERS, Kernel

    tools: dict[str, type[Any]] = {}
    for cls in Kernel(root)._tool_classes():
        if cls.name and cls.name not in RESERVED_PARAMETERS:
            tools.setdefault(cls.name, cls)  # the first in discovery order is the one boot keeps
    system_domains: frozenset[str] = frozenset()
    system_prefix = "/system"
    if (root / "tools" / "http" / "route_order.py").is_file():
        route_order = tool_module(root, "http", "route_order")
        system_domains = frozenset(route_order.system_domains())
        system_prefix = str(route_order.SYSTEM_PREFIX)
    return Facts(
        parameters=frozenset(tools) | RESERVED_PARAMETERS,
        coroutines={name: coroutine_methods(cls) for name, cls in tools.items()},
        system_domains=system_domains,
        system_prefix=system_prefix,
    )


def coroutine_methods(cls: type[Any]) -> frozenset[str]:
    """Public members of ``cls`` (inherited ones too) that are ``async def`` functions."""
    found: set[str] = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name, None)
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if inspect.iscoroutinefunction(member):
            found.add(name)
    return frozenset(found)
