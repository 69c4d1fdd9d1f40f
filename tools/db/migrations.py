"""SQL migrations: ``migrations/<domain>/NNN_name.sql``, applied once each, in dependency order.

``db.setup()`` applies them before any plugin boots (and ``python main.py migrate`` runs only
that). The rules:

- **Once, atomically, recorded.** Each file runs in its own transaction together with the row
  that records it (name and checksum) in ``keel_migrations``; a failing statement rolls the whole
  file back and stops the boot with the file, statement number and line in the message.
- **Never silently re-run.** A file whose recorded checksum differs from the file on disk is a
  boot error: write a new migration instead of editing an applied one. The checksum is taken over
  the text with line endings normalised, so a checkout that converts them does not trip it.
- **Order.** ``-- depends: users/001_create_users.sql`` lines (several per file, or several names
  separated by commas; a bare file name means the same domain) order files topologically;
  otherwise files run in alphabetical order of ``<domain>/<file>``. A dependency on a file that
  does not exist (and was never applied) is a boot error. A cycle does not stop the boot: the
  alphabetically first file of the cycle runs first, every other dependency is still honoured,
  and a warning names the cycle.
- **Concurrent boots apply each file once.** On PostgreSQL each migration transaction first takes
  a transaction-scoped advisory lock (per schema), on SQLite ``BEGIN IMMEDIATE`` is the lock; the
  file is then re-checked inside the transaction, so a process that lost the race skips it. These
  transactions are READ COMMITTED, so the re-check sees what the winner committed while this one
  waited for the lock (a SERIALIZABLE snapshot would be taken before the lock was granted).
- **Statements are split** by :func:`tools.db.sqltext.split_statements` (literals, comments,
  dollar quotes and trigger bodies are respected), so the same file works on both engines as far
  as its SQL does. ``BEGIN``/``COMMIT`` in a file is refused: on PostgreSQL a ``COMMIT`` there
  would end the migration's own transaction half-way and break its atomicity.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .errors import DatabaseError, DatabaseUnavailableError, MigrationError
from .placeholders import TRANSACTION_CONTROL, prepare
from .sqltext import Dialect, split_statements

log = logging.getLogger("keel.db.migrations")

TABLE = "keel_migrations"
_FILE_NAME = re.compile(r"^[0-9]+_[^/]+\.sql$")
_DEPENDS = re.compile(r"^[ \t]*--[ \t]*depends[ \t]*:(.*)$", re.IGNORECASE | re.MULTILINE)


class MigrationEngine(Protocol):
    """What applying migrations needs from an engine."""

    dialect: Dialect

    def transaction(self, isolation: str | None = None) -> Any: ...

    async def run_script_statement(self, sql: str) -> None: ...

    async def lock_migrations(self) -> None: ...

    async def query(self, sql: str, params: Any) -> list[dict[str, Any]]: ...

    async def query_one(self, sql: str, params: Any) -> dict[str, Any] | None: ...

    async def execute(self, sql: str, params: Any) -> int: ...


@dataclass(frozen=True)
class Migration:
    name: str
    """``<domain>/<file>``, the name it is recorded and depended on by."""
    text: str
    checksum: str
    depends: tuple[str, ...]


def discover(directory: Path) -> list[Migration]:
    """Every migration under ``directory`` (``<domain>/NNN_name.sql``), sorted by name."""
    if not directory.is_dir():
        return []
    stray = sorted(p.name for p in directory.glob("*.sql"))
    if stray:
        raise MigrationError(f"migrations must live in migrations/<domain>/, found {', '.join(stray)}")
    found: list[Migration] = []
    for path in sorted(directory.glob("*/*.sql")):
        domain = path.parent.name
        if not _FILE_NAME.match(path.name):
            raise MigrationError(f"{domain}/{path.name}: migration files are named NNN_name.sql")
        try:
            text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise MigrationError(f"{domain}/{path.name}: cannot read it: {exc}") from exc
        found.append(Migration(f"{domain}/{path.name}", text, _checksum(text), _dependencies(text, domain)))
    return sorted(found, key=lambda m: m.name)


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _dependencies(text: str, domain: str) -> tuple[str, ...]:
    names: list[str] = []
    for line in _DEPENDS.findall(text):
        for raw in re.split(r"[,\s]+", line.strip()):
            if raw:
                names.append(raw if "/" in raw else f"{domain}/{raw}")
    return tuple(dict.fromkeys(names))


def order(migrations: list[Migration], *, applied: Collection[str] = ()) -> list[Migration]:
    """Dependency order, alphabetical among independent files; see the module docstring."""
    by_name = {m.name: m for m in migrations}
    missing = [
        f"{m.name} depends on {dep}, which does not exist"
        for m in migrations
        for dep in m.depends
        if dep not in by_name and dep not in applied
    ]
    if missing:
        raise MigrationError("; ".join(missing))
    waiting_on = {m.name: {d for d in m.depends if d in by_name} for m in migrations}
    dependents: dict[str, list[str]] = {name: [] for name in by_name}
    for name, deps in waiting_on.items():
        for dep in deps:
            dependents[dep].append(name)
    ready = [name for name, deps in waiting_on.items() if not deps]
    heapq.heapify(ready)
    result: list[Migration] = []
    remaining = set(by_name)
    while remaining:
        if not ready:
            name = _break_cycle(waiting_on, remaining)
        else:
            name = heapq.heappop(ready)
        remaining.discard(name)
        result.append(by_name[name])
        for dependent in dependents[name]:
            deps = waiting_on[dependent]
            if name in deps:
                deps.discard(name)
                if not deps and dependent in remaining:
                    heapq.heappush(ready, dependent)
        waiting_on[name] = set()
    return result


def _break_cycle(waiting_on: dict[str, set[str]], remaining: set[str]) -> str:
    """Everything left waits on something: pick the first name alphabetically, warn about its cycle."""
    start = min(remaining)
    path, seen = [start], {start: 0}
    node = start
    while True:
        node = min(d for d in waiting_on[node] if d in remaining)
        if node in seen:
            cycle = [*path[seen[node] :], node]
            break
        seen[node] = len(path)
        path.append(node)
    log.warning(
        "migration dependency cycle %s; running %s first (alphabetical order)",
        " -> ".join(cycle),
        min(cycle),
    )
    return min(cycle)


async def apply_migrations(engine: MigrationEngine, directory: Path) -> list[str]:
    """Apply what is pending under ``directory``; return the names applied by this call."""
    migrations = discover(directory)
    async with engine.transaction("read_committed"):
        await engine.lock_migrations()
        await engine.run_script_statement(
            f"CREATE TABLE IF NOT EXISTS {TABLE} "
            "(name TEXT PRIMARY KEY, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    recorded = {
        row["name"]: row["checksum"] for row in await engine.query(f"SELECT name, checksum FROM {TABLE}", ())
    }
    changed = [m.name for m in migrations if m.name in recorded and recorded[m.name] != m.checksum]
    if changed:
        raise MigrationError(_changed_message(changed))
    gone = sorted(set(recorded) - {m.name for m in migrations})
    if gone:
        log.warning("applied migrations no longer on disk (kept as applied): %s", ", ".join(gone))
    applied: list[str] = []
    for migration in order(migrations, applied=recorded.keys()):
        if migration.name not in recorded and await _apply(engine, migration):
            applied.append(migration.name)
    return applied


async def recorded_checksums(engine: MigrationEngine) -> dict[str, str]:
    """The checksum of every applied migration by name; none when nothing was ever applied."""
    try:
        rows = await engine.query(f"SELECT name, checksum FROM {TABLE}", ())
    except DatabaseUnavailableError:
        raise
    except DatabaseError:  # the table does not exist yet
        return {}
    return {row["name"]: row["checksum"] for row in rows}


async def _apply(engine: MigrationEngine, migration: Migration) -> bool:
    async with engine.transaction("read_committed"):
        await engine.lock_migrations()
        row = await engine.query_one(f"SELECT checksum FROM {TABLE} WHERE name = $1", (migration.name,))
        if row is not None:  # another process applied it while we were waiting
            if row["checksum"] != migration.checksum:
                raise MigrationError(_changed_message([migration.name]))
            return False
        for number, statement in enumerate(split_statements(migration.text, engine.dialect), start=1):
            keyword = prepare(statement.text, engine.dialect).leading
            if keyword in TRANSACTION_CONTROL:
                refusal = MigrationError(
                    f"{migration.name}: statement {number} (line {statement.line}) is {keyword}: each "
                    "migration already runs in a transaction of its own, so leave transaction control out"
                )
                refusal.migration = migration.name
                raise refusal
            try:
                await engine.run_script_statement(statement.text)
            except DatabaseUnavailableError:
                raise  # an outage, not a broken file: the tool retries when the database is back
            except DatabaseError as exc:
                failure = MigrationError(
                    f"{migration.name}: statement {number} (line {statement.line}) failed: {exc}"
                )
                failure.migration = migration.name
                raise failure from exc
        await engine.execute(
            f"INSERT INTO {TABLE} (name, checksum, applied_at) VALUES ($1, $2, $3)",
            (migration.name, migration.checksum, datetime.now(UTC).isoformat(timespec="seconds")),
        )
    log.info("applied migration %s", migration.name)
    return True


def _changed_message(names: list[str]) -> str:
    return (
        f"applied migration{'s' if len(names) > 1 else ''} changed on disk: {', '.join(names)} "
        "(an applied migration is never re-run; restore the file and add a new migration instead)"
    )
