"""``keel migrate [--status | --plan]``: apply the SQL migrations, or report on them without applying.

``migrate`` sets the tools up (the db tool applies pending migrations in its ``setup()``) and stops,
as ``python main.py migrate`` always has. ``--status`` lists every file under ``migrations/`` as
applied, pending or changed; ``--plan`` lists the files ``migrate`` would apply, in the order it
would apply them. Neither runs a migration: both come from the db tool's own reader
(``tools/db/migration_report.py``), which opens the database without migrating it.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from core.cli.project import CommandError, load_environment, project_root, tool_module


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "migrate",
        help="apply pending SQL migrations (or --status / --plan)",
        description="Apply the pending migrations under migrations/<domain>/, then stop.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--status", action="store_true", help="list each migration file: applied or pending")
    mode.add_argument("--plan", action="store_true", help="list what `migrate` would apply, without applying")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    root = project_root(args)
    if not (args.status or args.plan):
        from core.kernel import Kernel

        return Kernel(root).run(["migrate"])
    load_environment(root)
    reader = tool_module(root, "db", "migration_report")
    try:
        report = asyncio.run(reader.migration_report(root))
    except Exception as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from None
    print(f"database: {report['database']}")
    entries: list[dict[str, Any]] = report["migrations"]
    if args.plan:
        pending = list(report["plan"])
        if not pending and not report["error"]:  # an error empties the plan: nothing is known applied
            print("nothing to apply: every migration is applied")
        elif pending:
            print(f"{len(pending)} migration(s) would be applied, in this order:")
            for number, name in enumerate(pending, start=1):
                print(f"  {number}. {name}")
        if report["error"]:
            print(f"migrate would stop: {report['error']}")
            return 1
        return 0
    if not entries:
        print("no migrations under migrations/")
    width = max((len(entry["name"]) for entry in entries), default=0)
    for entry in entries:
        when = f"  {entry['applied_at']}" if entry.get("applied_at") else ""
        print(f"  {entry['name']:<{width}}  {entry['state']}{when}")
    counts = {state: sum(1 for e in entries if e["state"] == state) for state in ("applied", "pending")}
    print(f"{counts['applied']} applied, {counts['pending']} pending")
    if report["error"]:
        print(f"problem: {report['error']}")
        return 1
    return 0
