"""What ``keel check`` needs from the project's tools, found the way the kernel finds tools.

``core`` never imports a tool statically: every ``tools/**/*.py`` (tests and caches aside, linked
folders followed) is imported from the root with the kernel's loader (:func:`core.loader.import_file`),
walked and picked by boot's own :func:`core.discovery.python_files` and
:func:`core.discovery.classes_defined_in`, and each ``BaseTool`` subclass defined there gives its
``name`` and which of its public methods are coroutine functions (the members ``core.tool_ports``
declares ``async``, a match ``tests/core/test_tool_ports.py`` holds every tool to). Nothing is
constructed or set up. A tool file that fails to import is a finding of its own, or every plugin
asking for its tool would be told, wrongly, that no such tool exists. The ``/system`` rule is read
from the http tool's ``route_order``.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

from core.base_tool import BaseTool
from core.cli.checks.findings import Facts, Finding
from core.cli.project import tool_module
from core.discovery import classes_defined_in, python_files
from core.loader import import_file


def gather(root: Path) -> tuple[Facts, list[Finding]]:
    """The facts, and a finding for each tool file that does not import."""
    from core.kernel import RESERVED_PARAMETERS

    tools: dict[str, type[BaseTool]] = {}
    failures: list[Finding] = []
    for path in python_files(root / "tools"):
        try:
            module = import_file(root, path)
        except Exception as exc:
            line = (exc.lineno or 1) if isinstance(exc, SyntaxError) else 1
            message = f"this tool file does not import ({type(exc).__name__}: {exc})"
            failures.append(Finding(os.path.relpath(path, root), line, message))
            continue
        for cls in classes_defined_in(module, BaseTool):
            if cls.name and cls.name not in RESERVED_PARAMETERS:
                tools.setdefault(cls.name, cls)  # the first in discovery order is the one boot keeps
    system_domains: frozenset[str] = frozenset()
    system_prefix = "/system"
    if (root / "tools" / "http" / "route_order.py").is_file():
        route_order = tool_module(root, "http", "route_order")
        system_domains = frozenset(route_order.system_domains())
        system_prefix = str(route_order.SYSTEM_PREFIX)
    facts = Facts(
        parameters=frozenset(tools) | RESERVED_PARAMETERS,
        coroutines={name: coroutine_methods(cls) for name, cls in tools.items()},
        system_domains=system_domains,
        system_prefix=system_prefix,
    )
    return facts, failures


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
