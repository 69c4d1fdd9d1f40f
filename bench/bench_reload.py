"""Live plugin reload: from a plugin file written to disk to its new route answering.

A Keel service (the http and plugin_watcher tools, ``PLUGINS_WATCH=1``, the watcher's default
batching) runs in its own process on loopback with one plugin, ``GET /probe`` answering
``{"version": N}``. For each of 50 changes the bench writes version N of the file and polls
``/probe`` over one keep-alive connection until it answers N; the time from the write to that
answer is one sample (watcher batching + import + boot of the new version + swap + request).

In the same run, interleaved with those changes, the same reload is done in this process through
the kernel's API (``kernel.plugin_host.apply``) on a booted, unserved copy of the root: the
reload mechanics alone, without the watcher and without HTTP. The ratio says how much of the
write-to-answer time is the watcher's batching and the request.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import emit  # noqa: E402
from core import Kernel  # noqa: E402

PROJECT = Path(__file__).resolve().parent.parent
CHANGES = 50
POLL_SECONDS = 0.001
BOUND_SECONDS = 30.0

PROBE = '''
from core import BasePlugin


class Probe(BasePlugin):
    def __init__(self, http):
        self.http = http

    def on_boot(self):
        self.http.add_endpoint("/probe", "GET", self.probe)

    async def probe(self, data, context):
        """Which version of this file is serving."""
        return {"version": VERSION}


VERSION = {version}
'''

SERVICE = """
import sys
sys.path.insert(0, {project!r})
from core import Kernel
sys.exit(Kernel({root!r}).run())
"""


def probe(version: int) -> str:
    return textwrap.dedent(PROBE).replace("{version}", str(version))


def make_root(base: Path) -> Path:
    root = base / "root"
    (root / "tools").mkdir(parents=True)
    for tool in ("http", "plugin_watcher"):
        (root / "tools" / tool).symlink_to(PROJECT / "tools" / tool, target_is_directory=True)
    plugins = root / "domains" / "bench" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "probe.py").write_text(probe(0))
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Client:
    """GET /probe on one keep-alive connection, reconnecting if the server closed it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def version(self) -> int | None:
        try:
            self.connection.request("GET", "/probe")
            response = self.connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException):
            self.connection.close()
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            return None
        if response.status != 200:
            return None
        return int(json.loads(body)["version"])

    def wait_for(self, version: int) -> float:
        """Poll until /probe answers ``version``; the perf_counter time it first did."""
        deadline = time.perf_counter() + BOUND_SECONDS
        while time.perf_counter() < deadline:
            if self.version() == version:
                return time.perf_counter()
            time.sleep(POLL_SECONDS)
        raise RuntimeError(f"/probe did not answer version {version} within {BOUND_SECONDS:g} s")


def start_service(root: Path, port: int, script: Path) -> subprocess.Popen[bytes]:
    script.write_text(SERVICE.format(project=str(PROJECT), root=str(root)))
    env = {
        **os.environ,
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
        "PLUGINS_WATCH": "1",
    }
    return subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.DEVNULL)


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        served_root, local_root = make_root(base / "served"), make_root(base / "local")
        served_file = served_root / "domains/bench/plugins/probe.py"
        local_file = local_root / "domains/bench/plugins/probe.py"
        port = free_port()
        service = start_service(served_root, port, base / "service.py")
        runner = asyncio.Runner()
        kernel = Kernel(local_root)
        try:
            client = Client(port)
            client.wait_for(0)
            for warm_up in range(1, 4):  # the watcher is watching once a change gets through
                served_file.write_text(probe(warm_up))
                client.wait_for(warm_up)
            runner.run(kernel.boot())
            served: list[float] = []
            local: list[float] = []
            for change in range(4, 4 + CHANGES):
                served_file.write_text(probe(change))
                written = time.perf_counter()
                served.append(client.wait_for(change) - written)

                local_file.write_text(probe(change))
                started = time.perf_counter()
                [outcome] = runner.run(kernel.plugin_host.apply([local_file]))
                local.append(time.perf_counter() - started)
                if not outcome.ok:
                    raise RuntimeError(f"in-process reload failed: {outcome.errors}")
                time.sleep(0.05)  # let the served version's retirement finish before the next write
        finally:
            runner.run(kernel.shutdown())
            runner.close()
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=30)
    emit("reload_write_to_answer_median", statistics.median(served) * 1000, "ms")
    emit("reload_write_to_answer_p95", percentile(served, 0.95) * 1000, "ms")
    emit("reload_api_in_process_median", statistics.median(local) * 1000, "ms")
    emit("reload_api_in_process_p95", percentile(local, 0.95) * 1000, "ms")
    emit("reload_write_to_answer_vs_api", statistics.median(served) / statistics.median(local), "x")


if __name__ == "__main__":
    main()
