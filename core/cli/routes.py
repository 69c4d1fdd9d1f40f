"""``keel routes``: every route the project registers, who owns it, its auth, and what shadows what.

The project is booted (tools and plugins, no serving) and the ``http`` tool is asked what was
registered (``get_endpoints()``); the route order it applied, the pairs in which one route would
hide another (``kernel.capabilities.http_route_order``), is printed after the table, and so is every
plugin that failed at boot (a route refused as a conflict makes its plugin DEAD, with the reason).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from typing import Any

from core.cli.project import CommandError, project_root

AUTH_LABELS = {False: "open", True: "token", "admin": "admin", "optional": "optional"}


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "routes",
        help="list every route: method, path, plugin, auth, and shadowing",
        description="Boot the project (without serving) and list the routes its plugins registered.",
    )
    parser.add_argument("--json", action="store_true", help="print the routes and notes as JSON")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    report = asyncio.run(collect(project_root(args)))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 1 if report["problems"] else 0
    routes: list[dict[str, Any]] = report["routes"]
    widths = [max([len(h), *(len(str(r[k])) for r in routes)]) for h, k in COLUMNS]
    print("  ".join(h.ljust(w) for (h, _), w in zip(COLUMNS, widths, strict=True)).rstrip())
    for route in routes:
        print("  ".join(str(route[k]).ljust(w) for (_, k), w in zip(COLUMNS, widths, strict=True)).rstrip())
    print(f"{len(routes)} route(s)")
    for note in report["shadowing"]:
        print(
            f"shadowing: {note['served_first']} ({note['owner']}) is matched before "
            f"{note['before']} ({note['before_owner']}), which it would otherwise hide"
        )
    for problem in report["problems"]:
        print(f"failed at boot: {problem}")
    return 1 if report["problems"] else 0


COLUMNS = (("METHOD", "method"), ("PATH", "path"), ("PLUGIN", "plugin"), ("AUTH", "auth"))


async def collect(root: Any) -> dict[str, Any]:
    """``{"routes": [...], "shadowing": [...], "problems": [...]}`` for the booted ``root``."""
    from core.kernel import Kernel

    logging.getLogger("keel").setLevel(logging.CRITICAL)  # the table is the output, not the boot
    kernel = Kernel(root)
    await kernel.boot()
    try:
        dump = kernel.registry.get_system_dump()
        if not kernel.container.has("http"):
            raise CommandError("this project has no http tool, so it has no routes")
        endpoints: list[dict[str, Any]] = kernel.container.get("http").get_endpoints()
    finally:
        await kernel.shutdown()
    routes = [
        {
            "method": e["method"],
            "path": e["path"],
            "plugin": e["owner"] or "-",
            "auth": AUTH_LABELS.get(e["auth"], str(e["auth"])) + (" (sse)" if e["sse"] else ""),
        }
        for e in sorted(endpoints, key=lambda e: (e["path"], e["method"]))
    ]
    shadowing = list(dump["kernel"].get("capabilities", {}).get("http_route_order") or [])
    problems = [
        f"{plugin_id} ({plugin['file']}): {plugin['error']}"
        for plugin_id, plugin in sorted(dump["plugins"].items())
        if plugin["status"] == "DEAD"
    ]
    problems += [f"{file}: {error}" for file, error in sorted(dict(dump.get("load_errors") or {}).items())]
    return {"routes": routes, "shadowing": shadowing, "problems": problems}
