"""``keel doctor``: is this configuration going to boot, and can it reach what it names?

One line per check, ``ok name: detail`` or ``FAIL name: what is wrong — fix: what to do``, and
exit status 1 when any check fails. ``config.*`` checks parse the settings each tool reads from
the environment and the root's ``.env`` with the tool's own parser (imported from the root, as
boot imports it), so the message is the one boot would log; ``backend.*`` checks try every
backend a setting names: the SQL database (an SQLite file must be writable, a PostgreSQL server
must accept a connection), Redis (``PING``) for the event bus, the store and the cluster, and the
LLM server. Nothing is booted or migrated, nothing is written, and every network attempt is bounded
by ``--timeout`` seconds (3 by default).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core.cli.project import CommandError, load_environment, project_root, tool_module
from core.console import log_format
from core.settings import env_float, env_int, env_raw, env_set, env_str

CORE_SECONDS = (
    "TOOL_SETUP_TIMEOUT",
    "PLUGIN_BOOT_TIMEOUT",
    "SHUTDOWN_TIMEOUT",
    "LOOP_STALL_THRESHOLD",
    "LOOP_STALL_LIVENESS",
    "RSS_SAMPLE_SECONDS",
    "PLUGIN_DRAIN_TIMEOUT",
    "HEALTH_CHECK_INTERVAL",
    "HEALTH_CHECK_TIMEOUT",
)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
REDIS_SCHEMES = ("redis", "rediss", "unix")
SQL_SCHEMES = ("sqlite", "postgresql", "postgres")


class Skip(Exception):
    """The check does not apply to this project (its tool is not there): no line is printed."""


Check = tuple[str, Callable[["Doctor"], str]]


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "doctor",
        help="check the configuration and that every configured backend is reachable",
        description=(
            "Parse every setting (environment and .env) and try every configured backend: the "
            "database, Redis, the LLM server. One `ok|FAIL name: detail` line per check; exit 1 "
            "if any fails."
        ),
    )
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="seconds each connection may take (default 3)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    root = project_root(args)
    load_environment(root)
    doctor = Doctor(root, max(0.1, args.timeout))
    failed = 0
    for name, check in CHECKS:
        try:
            detail = check(doctor)
        except Skip:
            continue
        except Exception as exc:  # every failure is a line of the report, never a crash of it
            failed += 1
            print(f"FAIL {name}: {_message(exc)}", flush=True)
            continue
        print(f"ok {name}: {detail}", flush=True)
    print(f"{failed} check(s) failed" if failed else "everything checked is ok")
    return 1 if failed else 0


class Fix(Exception):
    """A failed check whose message already says what to do."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} — fix: {fix}")


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, Fix):
        return text
    if isinstance(exc, CommandError):
        return f"{text} — fix: install the tool or remove the setting"
    return f"{text} — fix: correct the setting in the environment or in .env"


class Doctor:
    def __init__(self, root: Path, timeout: float) -> None:
        self.root = root
        self.timeout = timeout

    def module(self, tool: str, name: str) -> Any:
        if not (self.root / "tools" / tool / f"{name}.py").is_file():
            raise Skip
        return tool_module(self.root, tool, name)


# -- configuration -------------------------------------------------------------------------------


def check_core(doctor: Doctor) -> str:
    for name in CORE_SECONDS:
        env_float(name, 0.0)
    level = env_str("LOG_LEVEL", "INFO").upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    return f"timeouts, LOG_LEVEL={level}, LOG_FORMAT={log_format()}"


def check_http(doctor: Doctor) -> str:
    bounds = doctor.module("http", "bounds")
    host, port = http_address()
    for name in ("SHUTDOWN_GRACE_SECONDS", "SSE_HEARTBEAT_SECONDS", "SSE_FLUSH_SECONDS"):
        env_float(name, 0.0)
    raw_max = env_str("HTTP_MAX_BODY_BYTES")
    if raw_max and not raw_max.isdigit():
        raise ValueError(f"HTTP_MAX_BODY_BYTES must be a number of bytes, got {raw_max!r}")
    bounds.load_bounds()
    return f"listens on {host}:{port}"


def http_address() -> tuple[str, int]:
    """``HOST`` and ``PORT`` as the http tool reads them."""
    return env_str("HOST", "127.0.0.1"), env_int("PORT", 8000, minimum=0, maximum=65535)


def check_auth(doctor: Doctor) -> str:
    config = doctor.module("auth", "config")
    try:
        loaded = config.load_config()
    except Exception as exc:
        if type(exc).__name__ == "ToolNotConfiguredError":
            return str(exc)
        raise
    return f"tokens signed with {loaded.algorithm}"


def check_llm(doctor: Doctor) -> str:
    config = doctor.module("llm", "config").load_config(doctor.root)
    if config.provider == "echo":
        return "echo provider (answers locally; set LLM_PROVIDER=openai and LLM_BASE_URL for a model)"
    if not config.base_url:
        return "off (set LLM_BASE_URL to an OpenAI-compatible server, or LLM_PROVIDER=echo)"
    return f"{config.provider_name} at {_redacted(config.base_url)}"


def check_telemetry(doctor: Doctor) -> str:
    config = doctor.module("telemetry", "config").load_config()
    return "on" if config.enabled else str(config.why_off)


def check_event_bus(doctor: Doctor) -> str:
    url = env_str("EVENT_BUS_URL")
    if _scheme(url) in ("redis", "rediss"):
        doctor.module("event_bus", "redis_settings").RedisBusSettings.from_env(url)
        return f"Redis Streams at {_redacted(url)}"
    doctor.module("event_bus", "factory").make_backend(url)
    return "in-process bus"


def check_store(doctor: Doctor) -> str:
    url = env_str("STORE_URL")
    doctor.module("store", "store_tool").make_backend(url, doctor.root)
    return _redacted(url) if url else "in memory"


def check_db(doctor: Doctor) -> str:
    doctor.module("db", "db_tool").make_engine(env_str("DATABASE_URL"), doctor.root)
    return _redacted(database_url(doctor))


def check_scheduler(doctor: Doctor) -> str:
    module = doctor.module("scheduler", "scheduler_tool")
    for name in ("SCHEDULER_POLL_SECONDS", "SCHEDULER_LEASE_SECONDS", "SCHEDULER_RETRY_BACKOFF_SECONDS"):
        env_float(name, 0.0)
    url = module.scheduler_url()
    module.make_database(url, doctor.root)
    return _redacted(url)


def check_checkpoint(doctor: Doctor) -> str:
    module = doctor.module("checkpoint", "checkpoint_tool")
    url = module.checkpoint_url()
    module.make_backend(url, doctor.root)
    return _redacted(url)


# -- backends --------------------------------------------------------------------------------------


def database_url(doctor: Doctor) -> str:
    return env_str("DATABASE_URL") or doctor.module("db", "db_tool").DEFAULT_URL


def check_database(doctor: Doctor) -> str:
    return reach_sql(doctor, database_url(doctor), "DATABASE_URL", "leave it empty for the SQLite file")


def check_other_databases(doctor: Doctor) -> str:
    """SCHEDULER_URL, CHECKPOINT_URL and STORE_URL when they name a database DATABASE_URL is not."""
    checked = {database_url(doctor) if (doctor.root / "tools" / "db").is_dir() else ""}
    lines: list[str] = []
    for name in ("SCHEDULER_URL", "CHECKPOINT_URL", "STORE_URL"):
        url = env_str(name)
        if url and url not in checked and _scheme(url) in SQL_SCHEMES:
            checked.add(url)
            lines.append(reach_sql(doctor, url, name, "or leave it empty to use DATABASE_URL"))
    if not lines:
        raise Skip
    return "; ".join(lines)


def reach_sql(doctor: Doctor, url: str, setting: str, otherwise: str) -> str:
    scheme, _, rest = url.partition("://")
    if scheme == "sqlite":
        raw = rest[1:]
        if raw == ":memory:":
            return "SQLite in memory (nothing survives a restart)"
        path = Path(raw) if Path(raw).is_absolute() else doctor.root / raw
        return sqlite_writable(path, setting)
    if scheme not in ("postgresql", "postgres"):
        raise Skip  # the config check reports the scheme
    if env_raw("DB_CONNECT_TIMEOUT") is None:
        env_set("DB_CONNECT_TIMEOUT", str(doctor.timeout))
    engine = doctor.module("db", "db_tool").make_engine(url, doctor.root)
    where = _address(url, 5432)
    try:
        asyncio.run(_open_and_ping(engine, doctor.timeout))
    except Exception as exc:
        raise Fix(
            f"cannot connect to PostgreSQL at {where} ({_redacted(url)}): {exc or type(exc).__name__}",
            f"start PostgreSQL there (and create the database and user), or correct {setting} ({otherwise})",
        ) from None
    return f"PostgreSQL at {where} answers"


async def _open_and_ping(engine: Any, limit: float) -> None:
    async with asyncio.timeout(limit * 2):
        await engine.open()
        try:
            if not await engine.health_check():
                raise ConnectionError("connected, but the health query failed")
        finally:
            await engine.close()


def sqlite_writable(path: Path, setting: str) -> str:
    folder = path.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if path.exists() and not os.access(path, os.W_OK):
        raise Fix(f"the SQLite file {path} is not writable", f"make it writable, or point {setting} away")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise Fix(
            f"cannot create the SQLite file {path}: {existing} is not writable",
            f"make {existing} writable, or point {setting} at a writable place",
        )
    return f"SQLite file {path} is writable" + ("" if path.exists() else " (created at boot)")


def check_redis(doctor: Doctor) -> str:
    urls: dict[str, str] = {}
    for name in ("EVENT_BUS_URL", "STORE_URL", "CLUSTER_URL"):
        url = env_str(name)
        if _scheme(url) in REDIS_SCHEMES and url not in urls.values():
            urls[name] = url
    if not urls:
        raise Skip
    answers = []
    for name, url in urls.items():
        try:
            redis_ping(url, doctor.timeout)
        except Exception as exc:
            raise Fix(
                f"Redis at {_address(url, 6379)} ({name}) does not answer PING: {exc or type(exc).__name__}",
                f"start Redis there, or correct {name} (leave it empty for the in-process one)",
            ) from None
        answers.append(f"{_address(url, 6379)} ({name})")
    return "PONG from " + ", ".join(answers)


def redis_ping(url: str, timeout: float) -> None:
    """``AUTH`` (when the URL has a password) then ``PING`` over a raw socket, bounded by ``timeout``."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(parts.path)
    else:
        host = parts.hostname or "127.0.0.1"
        sock = socket.create_connection((host, parts.port or 6379), timeout=timeout)
        if parts.scheme == "rediss":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    with sock:
        sock.settimeout(timeout)
        if parts.password:
            _command(sock, "AUTH", *([parts.username] if parts.username else []), parts.password)
        reply = _command(sock, "PING")
        if reply != "+PONG":
            raise ConnectionError(f"unexpected reply {reply!r}")


def _command(sock: socket.socket, *words: str) -> str:
    payload = f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)
    sock.sendall(payload.encode())
    reply = b""
    while not reply.endswith(b"\r\n"):
        chunk = sock.recv(512)
        if not chunk:
            raise ConnectionError("the connection closed")
        reply += chunk
    text = reply.decode(errors="replace").strip()
    if text.startswith("-"):
        raise ConnectionError(text[1:])
    return text


def check_llm_server(doctor: Doctor) -> str:
    config = doctor.module("llm", "config").load_config(doctor.root)
    if config.provider == "echo" or not config.base_url:
        raise Skip
    parts = urlsplit(config.base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or "127.0.0.1"
    try:
        socket.create_connection((host, port), timeout=doctor.timeout).close()
    except OSError as exc:
        raise Fix(
            f"nothing accepts connections at {host}:{port} (LLM_BASE_URL): {exc.strerror or exc}",
            "start the model server, correct LLM_BASE_URL, or set LLM_PROVIDER=echo",
        ) from None
    return f"{host}:{port} accepts connections"


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower() if "://" in url else ""


def _address(url: str, default_port: int) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    try:
        port = parts.port or default_port
    except ValueError:
        port = default_port
    return f"{parts.hostname or '127.0.0.1'}:{port}"


def _redacted(url: str) -> str:
    """``url`` without its password: the report is pasted into tickets."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


CHECKS: tuple[Check, ...] = (
    ("config.core", check_core),
    ("config.http", check_http),
    ("config.db", check_db),
    ("config.auth", check_auth),
    ("config.llm", check_llm),
    ("config.telemetry", check_telemetry),
    ("config.event_bus", check_event_bus),
    ("config.store", check_store),
    ("config.scheduler", check_scheduler),
    ("config.checkpoint", check_checkpoint),
    ("backend.database", check_database),
    ("backend.other_databases", check_other_databases),
    ("backend.redis", check_redis),
    ("backend.llm", check_llm_server),
)
