"""Two Keel processes share one upstream (a model server of the test's own): stopping it leaves
both ready (200 ``degraded``) and serving the routes that do not need it, and restarting it brings
both back to ``ok`` with no request sent through the tool: the health checks alone recover it."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx

from tests.domains.system.process_kit import keel_process
from tests.kit import PING_PLUGIN, free_port, make_root, until, write


class Upstream:
    """A stand-in model server on a fixed port that can be stopped and started again."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self.writers):
                writer.transport.abort()
            await self.server.wait_closed()
            self.server = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b'content-length: 11\r\nconnection: close\r\n\r\n{"data":[]}')
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def test_a_shared_upstream_outage_degrades_the_fleet_without_emptying_it(tmp_path: Path) -> None:
    upstream = Upstream(free_port())
    await upstream.start()
    env = {
        "PORT": "0",
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "INFO",
        "LLM_BASE_URL": f"http://127.0.0.1:{upstream.port}/v1",
        "LLM_MODEL": "m",
        "LLM_CONNECT_TIMEOUT_SECONDS": "0.5",
        "HEALTH_CHECK_INTERVAL": "0.2",
        "HEALTH_CHECK_TIMEOUT": "2",
        "HEALTH_REQUIRED_TOOLS": "",
        "AUTH_SECRET_KEY": "",
    }
    roots = []
    for name in ("one", "two"):
        root = make_root(tmp_path, tools=("http", "logger", "system", "llm"), domains=("system",), name=name)
        write(root, "domains/demo/plugins/ping.py", PING_PLUGIN)
        roots.append(root)
    seen: list[int] = []
    try:
        async with (
            keel_process(roots[0], tmp_path / "one.log", env) as first,
            keel_process(roots[1], tmp_path / "two.log", env) as second,
            httpx.AsyncClient(timeout=10) as client,
        ):
            one, two = first.url, second.url

            async def fleet(status: str) -> bool:
                bodies = []
                for url in (one, two):
                    response = await client.get(f"{url}/system/health/ready")
                    seen.append(response.status_code)
                    bodies.append(response.json())
                    assert (await client.get(f"{url}/ping")).json() == {"pong": True}
                return all(body["status"] == status for body in bodies)

            await until(lambda: fleet("ok"), "both processes ok", limit=30)
            await upstream.stop()
            await until(lambda: fleet("degraded"), "both processes degraded", limit=30)
            body = (await client.get(f"{one}/system/health")).json()
            assert body["tools"]["llm"] == "DEAD" and body["degraded"][0]["tool"] == "llm"
            await upstream.start()
            await until(lambda: fleet("ok"), "both processes recovered with no traffic", limit=30)
            status = (await client.get(f"{two}/system/status")).json()
            assert status["tools"]["llm"]["message"] == "Recovered"
    finally:
        await upstream.stop()
    assert set(seen) == {200}, "readiness must never leave the pool over a shared upstream"
