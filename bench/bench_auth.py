"""What bearer-token authentication costs a request: a protected endpoint against the same unprotected.

A Kernel is booted on a generated root (the http and auth tools, the ``auth_wiring`` domain that
installs the validator, and one demo plugin serving ``GET /open`` and ``GET /private`` with the
same handler, the second with ``auth=True``). Requests are driven in process straight into the
http tool's ASGI app (no sockets, no client library), one at a time, so the difference between
the two endpoints is the server-side cost of checking the token: reading the header, the
validator, ``auth.check_token`` through the ToolProxy, PyJWT's HS256 verification.

Configurations alternate within each round; medians of the rounds are printed:

- ``asgi_{unprotected,protected}``: requests per second, the protected ones repeating one token (a
  client's usual pattern: the auth tool remembers tokens it has verified);
- ``asgi_protected_new_tokens``: requests per second when every request brings a token the server
  has never seen (the full PyJWT check each time);
- ``protected_extra`` / ``protected_new_token_extra``: µs a request pays for its token, and the
  ratios against the unprotected endpoint;
- ``verify_token_{remembered,new}``: µs of ``AuthTool.verify_token`` alone, for reference.

Run: ``.venv/bin/python bench/bench_auth.py``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench._util import emit  # noqa: E402
from core import Kernel  # noqa: E402

ROUNDS = 9
REQUESTS = 1500

DEMO_PLUGIN = """
from core import BasePlugin


class Demo(BasePlugin):
    def __init__(self, http):
        self.http = http

    def on_boot(self):
        self.http.add_endpoint("/open", "GET", self.hello)
        self.http.add_endpoint("/private", "GET", self.hello, auth=True)

    async def hello(self, data, context):
        return {"message": "hello"}
"""


def build_root(base: Path) -> Path:
    root = base / "root"
    for tool in ("http", "auth"):
        source = PROJECT / "tools" / tool
        for path in sorted(source.glob("*.py")):
            target = root / "tools" / tool / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    (root / "domains" / "demo" / "plugins").mkdir(parents=True)
    (root / "domains" / "auth_wiring").symlink_to(
        PROJECT / "domains" / "auth_wiring", target_is_directory=True
    )
    (root / "domains" / "demo" / "plugins" / "demo.py").write_text(DEMO_PLUGIN, encoding="utf-8")
    return root


class Driver:
    """Sends one GET at a time into an ASGI app and checks the status."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.status = 0

    async def get(self, path: str, headers: list[tuple[bytes, bytes]]) -> int:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        await self.app(scope, self._receive, self._send)
        return self.status

    async def _receive(self) -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]


async def per_request_us(driver: Driver, path: str, headers: list[list[tuple[bytes, bytes]]]) -> float:
    """µs per request; ``headers`` holds one header list per request, or a single one for all."""
    many = len(headers) > 1
    # The driver never waits, so the loop would not turn for the whole run, which the loop
    # watchdog rightly reports as a stall: let it turn once before each (timed) batch.
    await asyncio.sleep(0)
    start = time.perf_counter()
    for i in range(REQUESTS):
        await driver.get(path, headers[i] if many else headers[0])
    elapsed = time.perf_counter() - start
    if driver.status != 200:
        raise RuntimeError(f"GET {path} answered {driver.status}")
    return elapsed / REQUESTS * 1e6


async def main() -> None:
    os.environ["AUTH_SECRET_KEY"] = "bench-secret-" + "k" * 40
    os.environ.pop("AUTH_ALGORITHM", None)
    with tempfile.TemporaryDirectory() as base:
        kernel = Kernel(build_root(Path(base)))
        await kernel.boot()
        try:
            http = kernel.container.get_raw_tools()["http"]
            auth = kernel.container.get_raw_tools()["auth"]
            token = auth.create_token("bench-user", {"roles": ["user"]})  # type: ignore[attr-defined]
            driver = Driver(http.asgi)  # type: ignore[attr-defined]
            plain = [(b"host", b"bench")]
            bearer = [*plain, (b"authorization", f"Bearer {token}".encode())]
            samples: dict[str, list[float]] = {}
            for _ in range(ROUNDS):
                fresh = [
                    auth.create_token(f"user-{i}", {"roles": ["user"]})  # type: ignore[attr-defined]
                    for i in range(2 * REQUESTS)
                ]
                samples.setdefault("open", []).append(await per_request_us(driver, "/open", [plain]))
                samples.setdefault("private", []).append(await per_request_us(driver, "/private", [bearer]))
                new_headers = [[*plain, (b"authorization", f"Bearer {t}".encode())] for t in fresh[:REQUESTS]]
                samples.setdefault("new", []).append(await per_request_us(driver, "/private", new_headers))
                samples.setdefault("verify", []).append(verify_us(auth, [token]))
                samples.setdefault("verify_new", []).append(verify_us(auth, fresh[REQUESTS:]))
        finally:
            await kernel.shutdown()
    median = {name: statistics.median(values) for name, values in samples.items()}
    unprotected, protected, new = median["open"], median["private"], median["new"]
    emit("asgi_unprotected", 1e6 / unprotected, "req/s")
    emit("asgi_protected", 1e6 / protected, "req/s")
    emit("asgi_protected_new_tokens", 1e6 / new, "req/s")
    emit("protected_extra", protected - unprotected, "us")
    emit("protected_vs_unprotected", protected / unprotected, "x")
    emit("protected_new_token_extra", new - unprotected, "us")
    emit("protected_new_token_vs_unprotected", new / unprotected, "x")
    emit("verify_token_remembered", median["verify"], "us")
    emit("verify_token_new", median["verify_new"], "us")


def verify_us(auth: Any, tokens: list[str]) -> float:
    """µs per ``verify_token`` over ``REQUESTS`` calls cycling through ``tokens``."""
    start = time.perf_counter()
    for i in range(REQUESTS):
        auth.verify_token(tokens[i % len(tokens)])
    return (time.perf_counter() - start) / REQUESTS * 1e6


if __name__ == "__main__":
    asyncio.run(main())
