"""The ``cluster`` tool: Keel processes that share Redis announce themselves, so any one shows them all.

What a plugin (the system domain's ``/system/cluster``, the dashboard) relies on::

    cluster.enabled                  # False on one machine: there is nothing to share
    cluster.process_id               # "host:pid:xxxxxxxx", unique per process start
    await cluster.members()          # every live process's announcement, this one first
    cluster.version_mismatches(ms)   # plugin files whose code differs between those processes

Each process writes its announcement every ``CLUSTER_HEARTBEAT_SECONDS`` under its own key with a
time to live of three heartbeats, so a process that is killed or paused drops out of the list by
itself, with no clean-up by anyone: the list is what is alive now, never a history. An announcement
holds the process's id, host, pid, Keel version, start time and last heartbeat, the status of each
of its tools and plugins, headline figures (tool calls and errors in its ring buffer), and a short
SHA-256 of each plugin file it runs. Comparing those hashes is how a file changed on one machine
only (a half-finished deploy, a live edit) is found: the same file served in two versions.

Configuration (read in ``setup()``):

- ``CLUSTER_URL``: ``redis://...``; by default the ``EVENT_BUS_URL`` or ``STORE_URL`` when one of
  them is Redis (processes sharing those share a deployment), otherwise the tool is OFF;
- ``CLUSTER_PREFIX`` (``keel:cluster:``): the key prefix, one per deployment sharing a Redis;
- ``CLUSTER_HEARTBEAT_SECONDS`` (5).

Redis being unreachable never stops the process: the announcement is retried at the next
heartbeat, the tool is FAIL with the reason meanwhile, and ``members()`` raises
``ToolUnavailableError`` (an answer of 503, not a list that silently shows only this process).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from core.base_tool import BaseTool
from core.errors import ToolUnavailableError
from core.registry import ToolStatus
from core.settings import env_duration, env_str

log = logging.getLogger("keel.cluster")

DEFAULT_PREFIX = "keel:cluster:"
DEFAULT_HEARTBEAT = 5.0
TTL_HEARTBEATS = 3


def shared_redis_url() -> str | None:
    """``CLUSTER_URL``, else the event bus's or the store's URL when it is Redis."""
    explicit = env_str("CLUSTER_URL")
    if explicit:
        return explicit
    for name in ("EVENT_BUS_URL", "STORE_URL"):
        value = env_str(name)
        if value.startswith(("redis://", "rediss://", "unix://")):
            return value
    return None


def keel_version() -> str:
    try:
        return importlib.metadata.version("keel")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class FileHashes:
    """Short SHA-256s of files, read again only when a file's size or mtime changed."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[int, int, str]] = {}

    def of(self, path: Path) -> str | None:
        try:
            stat = path.stat()
            known = self._seen.get(path)
            if known is not None and known[:2] == (stat.st_mtime_ns, stat.st_size):
                return known[2]
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        except OSError:
            return None
        self._seen[path] = (stat.st_mtime_ns, stat.st_size, digest)
        return digest


class ClusterTool(BaseTool):
    """Announces this process in Redis and lists the live processes of the deployment."""

    name = "cluster"

    def __init__(self) -> None:
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.prefix = DEFAULT_PREFIX
        self.heartbeat = DEFAULT_HEARTBEAT
        self._client: aioredis.Redis | None = None
        self._hashes = FileHashes()
        self._started_at = time.time()
        self._url: str | None = None

    @property
    def enabled(self) -> bool:
        """Whether processes share a Redis to announce themselves in."""
        return self._client is not None

    async def setup(self) -> None:
        self.prefix = env_str("CLUSTER_PREFIX", DEFAULT_PREFIX)
        self.heartbeat = env_duration("CLUSTER_HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT, positive=True)
        self._url = shared_redis_url()
        if self._url is None:
            self.kernel_registry.update_tool_status(
                self.name,
                ToolStatus.OFF,
                "one process: set CLUSTER_URL (or a Redis EVENT_BUS_URL/STORE_URL) to list every process",
            )
            return
        self._client = aioredis.Redis.from_url(
            self._url, socket_connect_timeout=3, socket_timeout=3, decode_responses=True
        )
        await self._announce_or_report()

    async def on_boot_complete(self, container: Any) -> None:
        """Announce with the plugins booted: the announcement at set-up had none yet."""
        await self._announce_or_report()

    async def serve(self, stop: asyncio.Event) -> None:
        """Heartbeat until the process stops; then withdraw the announcement at once."""
        if self._client is None:
            return
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.heartbeat)
            except TimeoutError:
                await self._announce_or_report()
        try:
            await self._client.delete(self._key(self.process_id))
        except (RedisError, OSError):
            pass  # it expires by itself within three heartbeats

    async def shutdown(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def health_check(self) -> bool:
        if self._client is None:
            return True
        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    # -- what plugins use -----------------------------------------------------------------------

    async def members(self) -> list[dict[str, Any]]:
        """Every live process's announcement, this process first, the others by start time."""
        if self._client is None:
            return [self.announcement()]
        try:
            keys = [key async for key in self._client.scan_iter(match=f"{self.prefix}proc:*", count=200)]
            raw = await self._client.mget(keys) if keys else []
        except (RedisError, OSError) as exc:
            raise ToolUnavailableError(
                f"cluster: Redis is unreachable ({type(exc).__name__}: {exc})"
            ) from exc
        found = {}
        for text in raw:
            if text is None:
                continue  # expired between SCAN and MGET
            try:
                entry = json.loads(text)
            except ValueError:
                continue
            found[entry.get("id")] = entry
        found[self.process_id] = self.announcement()  # this process as it is now, not as last written
        others = sorted((e for i, e in found.items() if i != self.process_id), key=lambda e: e["started_at"])
        return [found[self.process_id], *others]

    @staticmethod
    def version_mismatches(members: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
        """Plugin files whose code differs between processes: file -> {hash: [process ids]}."""
        versions: dict[str, dict[str, list[str]]] = {}
        for member in members:
            for file, digest in (member.get("plugin_files") or {}).items():
                versions.setdefault(file, {}).setdefault(digest or "unreadable", []).append(member["id"])
        return {file: by_hash for file, by_hash in sorted(versions.items()) if len(by_hash) > 1}

    def announcement(self) -> dict[str, Any]:
        """What this process tells the others about itself."""
        dump = self.kernel_registry.get_system_dump()
        plugins = dump.get("plugins", {})
        files: dict[str, str | None] = {}
        for plugin in plugins.values():
            file = plugin.get("file")
            if file:
                files[file] = self._hashes.of(self.project_root / file)
        calls = self.kernel_registry.get_metrics()
        return {
            "id": self.process_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": keel_version(),
            "started_at": self._started_at,
            "heartbeat_at": time.time(),
            "tools": {name: tool["status"] for name, tool in dump.get("tools", {}).items()},
            "plugins": {name: plugin["status"] for name, plugin in plugins.items()},
            "load_errors": len(dump.get("load_errors", {})),
            "calls": len(calls),
            "call_errors": sum(1 for call in calls if not call.get("success", True)),
            "plugin_files": files,
        }

    # -- internals ------------------------------------------------------------------------------

    def _key(self, process_id: str) -> str:
        return f"{self.prefix}proc:{process_id}"

    async def _announce_or_report(self) -> None:
        if self._client is None:
            return
        ttl_ms = int(self.heartbeat * TTL_HEARTBEATS * 1000)
        try:
            await self._client.set(self._key(self.process_id), json.dumps(self.announcement()), px=ttl_ms)
        except (RedisError, OSError) as exc:
            reason = f"cannot announce this process in Redis ({type(exc).__name__}: {exc}); retrying"
            if self.kernel_registry.tool_status(self.name) != ToolStatus.FAIL:
                log.warning("cluster: %s", reason)
            self.kernel_registry.update_tool_status(self.name, ToolStatus.FAIL, reason)
            return
        if self.kernel_registry.tool_status(self.name) == ToolStatus.FAIL:
            self.kernel_registry.update_tool_status(self.name, ToolStatus.OK, f"announcing in {self.prefix}")
