"""What ``keel migrate --status`` and ``--plan`` print: the migrations on disk against those applied.

It opens the database ``DATABASE_URL`` names (as the db tool's ``setup()`` would) but applies
nothing: it reads ``keel_migrations`` when that table exists, and orders the pending files with the
same :func:`~tools.db.migrations.order` that ``migrate`` uses, so the plan is the order they would
run in. A file whose recorded checksum differs from the file on disk, or a dependency that does not
exist, is reported as the error ``migrate`` would stop with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.settings import env_str

from .db_tool import make_engine
from .errors import DatabaseError, MigrationError
from .migrations import TABLE, Migration, discover, order


async def migration_report(project_root: Path) -> dict[str, Any]:
    """``{"database", "migrations": [{"name", "state", "applied_at"}], "plan": [names], "error"}``.

    ``state`` is ``applied``, ``pending``, ``changed`` (applied, but the file differs since) or
    ``missing`` (applied, but the file is gone). ``error`` is None or why ``migrate`` would stop.
    """
    error: str | None = None
    try:
        migrations = discover(project_root / "migrations")
    except MigrationError as exc:
        return {"database": "", "migrations": [], "plan": [], "error": str(exc)}
    engine = make_engine(env_str("DATABASE_URL"), project_root)
    await engine.open()
    try:
        recorded = await _recorded(engine)
    finally:
        await engine.close()
    entries: list[dict[str, Any]] = []
    for migration in migrations:
        row = recorded.get(migration.name)
        if row is None:
            state = "pending"
        elif row["checksum"] != migration.checksum:
            state = "changed"
        else:
            state = "applied"
        entries.append(
            {"name": migration.name, "state": state, "applied_at": row["applied_at"] if row else None}
        )
    on_disk = {m.name for m in migrations}
    entries.extend(
        {"name": name, "state": "missing", "applied_at": recorded[name]["applied_at"]}
        for name in sorted(set(recorded) - on_disk)
    )
    changed = [entry["name"] for entry in entries if entry["state"] == "changed"]
    if changed:
        error = f"applied migration(s) changed on disk: {', '.join(changed)} (add a new migration instead)"
    plan: list[str] = []
    try:
        ordered = order(migrations, applied=recorded.keys())
        pending: list[Migration] = [m for m in ordered if m.name not in recorded]
        plan = [m.name for m in pending]
    except MigrationError as exc:
        error = str(exc)
    return {"database": engine.describe(), "migrations": entries, "plan": plan, "error": error}


async def _recorded(engine: Any) -> dict[str, dict[str, Any]]:
    """The rows of ``keel_migrations`` by name; none when the table does not exist yet."""
    try:
        rows = await engine.query(f"SELECT name, checksum, applied_at FROM {TABLE}", ())
    except DatabaseError:
        return {}
    return {row["name"]: row for row in rows}
