"""Requests per second and p99 latency of a Keel plugin endpoint against bare FastAPI.

Both servers run in their own process on loopback with the same uvicorn settings (uvloop,
httptools, one worker, access log off, lifespan off) and serve the same route, ``GET /hello``
answering ``{"message": "hello"}``: Keel as a booted Kernel on a generated project root (the http,
logger and registry tools, the system domain and one demo plugin), the baseline as a plain FastAPI
app with one ``async def`` route. ``wrk`` (``-t1 -c50 -d3s --latency``) loads them in alternating
runs after a warm-up; the medians are printed as ``name: value unit`` lines.

``wrk`` comes from Debian's package; when it is missing and this runs as root with apt-get, the
script installs it, otherwise it prints why it skipped.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench._util import ensure_wrk, free_port, start_server  # noqa: E402

PAIRS = 5
DURATION = "3s"
CONNECTIONS = "50"

KEEL_PLUGIN = """
from core import BasePlugin


class HelloPlugin(BasePlugin):
    def __init__(self, http):
        self.http = http

    def on_boot(self):
        self.http.add_endpoint("/hello", "GET", self.hello)

    async def hello(self, data, context):
        return {"message": "hello"}
"""

KEEL_MAIN = """
import sys
sys.path.insert(0, {project!r})
from core import Kernel
sys.exit(Kernel({root!r}).run())
"""

BARE_MAIN = """
import sys
import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.get("/hello")
async def hello():
    return {{"message": "hello"}}


config = uvicorn.Config(
    app, host="127.0.0.1", port={port}, loop="uvloop", http="httptools",
    access_log=False, lifespan="off", log_level="warning",
)
uvicorn.Server(config).run()
"""


def make_keel_root(base: Path) -> Path:
    root = base / "keel"
    for tool in ("http", "logger", "system"):
        source = PROJECT / "tools" / tool
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" not in path.parts:
                target = root / "tools" / tool / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(path)
    (root / "domains").mkdir()
    (root / "domains" / "system").symlink_to(PROJECT / "domains" / "system", target_is_directory=True)
    plugin = root / "domains" / "demo" / "plugins" / "hello.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(textwrap.dedent(KEEL_PLUGIN), encoding="utf-8")
    return root


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def run_wrk(wrk: str, port: int, duration: str) -> tuple[float, float]:
    """(requests per second, p99 latency in ms) of one wrk run."""
    output = subprocess.run(
        [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{duration}", "--latency", f"http://127.0.0.1:{port}/hello"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rps = re.search(r"Requests/sec:\s*([\d.]+)", output)
    p99 = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", output)
    if rps is None or p99 is None or non_2xx is not None:
        raise RuntimeError(f"unexpected wrk output:\n{output}")
    return float(rps.group(1)), float(p99.group(1)) * _UNITS[p99.group(2)]


def main() -> int:
    wrk = ensure_wrk()
    if wrk is None:
        print("http_bench: skipped (wrk is not installed and could not be installed: apt-get install wrk)")
        return 0
    with tempfile.TemporaryDirectory(prefix="keel-bench-http-") as tmp:
        base = Path(tmp)
        keel_port, bare_port = free_port(), free_port()
        keel_script = base / "keel_main.py"
        keel_script.write_text(KEEL_MAIN.format(project=str(PROJECT), root=str(make_keel_root(base))))
        bare_script = base / "bare_main.py"
        bare_script.write_text(BARE_MAIN.format(port=bare_port))
        keel = start_server(
            keel_script,
            keel_port,
            "/hello",
            {"PORT": str(keel_port), "HOST": "127.0.0.1", "LOG_LEVEL": "WARNING"},
        )
        bare = start_server(bare_script, bare_port, "/hello")
        try:
            run_wrk(wrk, keel_port, "1s")  # warm-up
            run_wrk(wrk, bare_port, "1s")
            keel_runs: list[tuple[float, float]] = []
            bare_runs: list[tuple[float, float]] = []
            for pair in range(PAIRS):
                order = [(keel_runs, keel_port), (bare_runs, bare_port)]
                for runs, port in order if pair % 2 == 0 else reversed(order):
                    runs.append(run_wrk(wrk, port, DURATION))
        finally:
            for process in (keel, bare):
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        keel_rps = statistics.median(r for r, _ in keel_runs)
        bare_rps = statistics.median(r for r, _ in bare_runs)
        print(f"http_keel_rps: {keel_rps:.0f} req/s")
        print(f"http_bare_rps: {bare_rps:.0f} req/s")
        print(f"http_rps_ratio: {keel_rps / bare_rps:.3f} x")
        print(f"http_keel_p99: {statistics.median(p for _, p in keel_runs):.2f} ms")
        print(f"http_bare_p99: {statistics.median(p for _, p in bare_runs):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
