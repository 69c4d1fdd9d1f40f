"""Helpers the db tests share: engines to run against, and temporary roots the kernel can boot.

PostgreSQL comes from ``DATABASE_URL_TEST`` (default: the local server's ``test`` database). Each
test gets its own schema (``search_path`` in the URL), dropped afterwards, so parallel runs and
other suites sharing the database never see each other's tables.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from core.registry import Registry
from tests.conftest import service_unavailable
from tests.kit import PROJECT, make_root
from tools.db.db_tool import DbTool

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pg_base_url() -> str:
    return os.environ.get("DATABASE_URL_TEST", "").strip() or DEFAULT_PG_URL


def with_search_path(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


async def require_postgres() -> str:
    """The base URL, or skip (fail under REQUIRE_SERVICES=1) when the server is not there."""
    url = pg_base_url()
    try:
        connection = await asyncpg.connect(url, timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        service_unavailable(f"PostgreSQL at {url} is unreachable ({type(exc).__name__}: {exc})")
        raise  # service_unavailable skips or fails; this line is never reached
    await connection.close()
    return url


@asynccontextmanager
async def pg_schema() -> AsyncIterator[str]:
    """A fresh schema for one test; yields a DATABASE_URL that uses it."""
    base = await require_postgres()
    schema = f"keel_test_{uuid.uuid4().hex[:12]}"
    connection = await asyncpg.connect(base)
    try:
        await connection.execute(f"CREATE SCHEMA {schema}")
        yield with_search_path(base, schema)
    finally:
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await connection.close()


def new_tool(project_root: Path) -> DbTool:
    tool = DbTool()
    registry = Registry()
    registry.register_tool(DbTool.name)
    tool.bind(project_root=project_root, registry=registry)
    return tool


@asynccontextmanager
async def started_tool(project_root: Path) -> AsyncIterator[DbTool]:
    """A ``DbTool`` set up from the current environment, shut down afterwards."""
    tool = new_tool(project_root)
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()


def linked_root(
    tmp_path: Path, *, tools: Iterable[str] = ("db",), domains: Iterable[str] = (), name: str = "root"
) -> Path:
    """A project root linking the named tools file by file (``rglob`` skips linked folders)."""
    root = make_root(tmp_path, domains=domains, name=name)
    for tool in tools:
        source = PROJECT / "tools" / tool
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            target = root / "tools" / tool / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    return root


def write_migration(root: Path, name: str, sql: str) -> Path:
    path = root / "migrations" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sql, encoding="utf-8")
    return path


class Forwarder:
    """A TCP relay on a fixed loopback port to the real PostgreSQL, switched on and off by a test.

    Stopping it closes the listening socket and every relayed connection, which is what a database
    restart looks like from the client; starting it again on the same port is the server coming back.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        for pump in list(self._pumps):
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, upstream_writer))
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            pump = asyncio.create_task(_pump(source, sink))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        sink.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def through(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the loopback relay's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def target_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


_PROJECT_PACKAGES = ("tools", "domains")


@contextmanager
def project_modules_restored() -> Iterator[None]:
    """Put ``tools.*`` and ``domains.*`` back in ``sys.modules`` as they were.

    Booting a kernel on a temporary root re-points those packages at the root's folders; a test
    that does so must not leave a later test importing (even lazily) from the wrong tree.
    """
    saved = {name: module for name, module in sys.modules.items() if _is_project_module(name)}
    try:
        yield
    finally:
        for name in [name for name in sys.modules if _is_project_module(name) and name not in saved]:
            del sys.modules[name]
        sys.modules.update(saved)


def _is_project_module(name: str) -> bool:
    return name.split(".", 1)[0] in _PROJECT_PACKAGES
