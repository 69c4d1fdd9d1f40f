"""Requests per second and p99 latency of a Keel plugin endpoint against bare FastAPI and bare ASGI.

Four servers: Keel as shipped (with the client bounds of ``tools/http/bounds.py``), Keel with the
bounds taken out (uvicorn's plain httptools protocol, still with ``header_checks``, and no
shutdown guard: "before the bounds"),
a bare FastAPI app and a bare ASGI callable. All run in their own process on loopback with the
same uvicorn settings (uvloop, httptools, one worker, access log off, lifespan off, no proxy
headers: Keel reads them only from ``HTTP_TRUSTED_PROXIES``, unset here) and serve the same
route, ``GET /hello`` answering ``{"message": "hello"}``: Keel as a booted Kernel on a generated
project root (the http, logger and registry tools, the system domain and one demo plugin). The
bare ASGI callable does the work an endpoint must and no more: it serialises the answer per
request. ``wrk`` (``-t1 -c50 -d3s --latency``) loads them in alternating runs after a warm-up;
the medians are printed as ``name: value unit`` lines.

``wrk`` comes from Debian's package; when it is missing and this runs as root with apt-get, the
script installs it, otherwise it prints why it skipped.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench._util import emit_ratio, ensure_wrk, free_port, start_server  # noqa: E402

PAIRS = 4
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
if {unbounded!r}:
    import uvicorn
    plain_init = uvicorn.Config.__init__

    def unbounded_init(self, app, *args, **kwargs):
        kwargs["http"] = "httptools"
        if hasattr(app, "stopping"):
            app.stopping = None  # drop the shutdown guard
        plain_init(self, app, *args, **kwargs)

    uvicorn.Config.__init__ = unbounded_init
    from tools.http import header_checks

    header_checks.install()  # what the bounded protocol installs: only the bounds are left out
from core import Kernel
sys.exit(Kernel({root!r}).run())
"""

ASGI_MAIN = """
import uvicorn
from pydantic_core import to_json


async def app(scope, receive, send):
    # The work any endpoint does per request, with Keel's own serialiser: the answer serialised
    # and its length measured, not bytes prepared once.
    body = to_json({{"message": "hello"}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({{"type": "http.response.start", "status": 200, "headers": headers}})
    await send({{"type": "http.response.body", "body": body}})


config = uvicorn.Config(
    app, host="127.0.0.1", port={port}, loop="uvloop", http="httptools",
    access_log=False, lifespan="off", log_level="warning", proxy_headers=False,
)
uvicorn.Server(config).run()
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
    access_log=False, lifespan="off", log_level="warning", proxy_headers=False,
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_wrk(wrk: str, port: int, duration: str, pid: int | None = None) -> tuple[float, float, float]:
    """(requests per second, p99 latency in ms, server CPU µs per request) of one wrk run."""
    cpu_before = cpu_seconds(pid) if pid is not None else 0.0
    output = subprocess.run(
        [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{duration}", "--latency", f"http://127.0.0.1:{port}/hello"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    cpu = cpu_seconds(pid) - cpu_before if pid is not None else 0.0
    requests = re.search(r"(\d+) requests in", output)
    rps = re.search(r"Requests/sec:\s*([\d.]+)", output)
    p99 = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", output)
    if rps is None or p99 is None or requests is None or non_2xx is not None:
        raise RuntimeError(f"unexpected wrk output:\n{output}")
    cpu_per_request = 1e6 * cpu / max(1, int(requests.group(1)))
    return float(rps.group(1)), float(p99.group(1)) * _UNITS[p99.group(2)], cpu_per_request


def main() -> int:
    wrk = ensure_wrk()
    if wrk is None:
        print("http_bench: skipped (wrk is not installed and could not be installed: apt-get install wrk)")
        return 0
    with tempfile.TemporaryDirectory(prefix="keel-bench-http-") as tmp:
        base = Path(tmp)
        root = make_keel_root(base)
        ports = {name: free_port() for name in ("keel", "keel_unbounded", "bare", "asgi")}
        scripts = {
            "keel": KEEL_MAIN.format(project=str(PROJECT), root=str(root), unbounded=False),
            "keel_unbounded": KEEL_MAIN.format(project=str(PROJECT), root=str(root), unbounded=True),
            "bare": BARE_MAIN.format(port=ports["bare"]),
            "asgi": ASGI_MAIN.format(port=ports["asgi"]),
        }
        processes = {}
        try:
            for name, source in scripts.items():
                script = base / f"{name}_main.py"
                script.write_text(source)
                env = {"PORT": str(ports[name]), "HOST": "127.0.0.1", "LOG_LEVEL": "WARNING"}
                processes[name] = start_server(script, ports[name], "/hello", env if "keel" in name else None)
            for port in ports.values():
                run_wrk(wrk, port, "1s")  # warm-up
            runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ports}
            names = list(ports)
            for pair in range(PAIRS):
                for name in names if pair % 2 == 0 else reversed(names):
                    runs[name].append(run_wrk(wrk, ports[name], DURATION, processes[name].pid))
        finally:
            for process in processes.values():
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        rps = {name: statistics.median(r[0] for r in values) for name, values in runs.items()}
        p99 = {name: statistics.median(r[1] for r in values) for name, values in runs.items()}
        cpu = {name: statistics.median(r[2] for r in values) for name, values in runs.items()}
        print(f"http_keel_rps: {rps['keel']:.0f} req/s")
        print(f"http_keel_unbounded_rps: {rps['keel_unbounded']:.0f} req/s")
        print(f"http_bare_rps: {rps['bare']:.0f} req/s")
        print(f"http_asgi_rps: {rps['asgi']:.0f} req/s")
        print(f"http_rps_ratio: {rps['keel'] / rps['bare']:.3f} x")
        print(f"http_bounds_cost: {100 * (1 - rps['keel'] / rps['keel_unbounded']):.1f} %")
        for name in ports:
            print(f"http_{name}_cpu: {cpu[name]:.1f} us/request")
        # Server CPU per request is far less disturbed by other load on the machine than req/s.
        print(f"http_bounds_cpu_cost: {100 * (cpu['keel'] / cpu['keel_unbounded'] - 1):.1f} %")
        print(f"http_keel_p99: {p99['keel']:.2f} ms")
        print(f"http_keel_unbounded_p99: {p99['keel_unbounded']:.2f} ms")
        print(f"http_bare_p99: {p99['bare']:.2f} ms")
        print(f"http_asgi_p99: {p99['asgi']:.2f} ms")
        # Both baselines, as req/s and as server CPU per request (the steadier of the two here).
        emit_ratio("http_keel_vs_asgi_rps", rps["keel"] / rps["asgi"], "raw ASGI app, same uvicorn", ">= 0.7")
        emit_ratio("http_keel_vs_asgi_cpu", cpu["asgi"] / cpu["keel"], "raw ASGI app, CPU/request", ">= 0.7")
        emit_ratio("http_keel_vs_fastapi_rps", rps["keel"] / rps["bare"], "plain FastAPI route", ">= 1.0")
        emit_ratio(
            "http_keel_vs_fastapi_cpu", cpu["bare"] / cpu["keel"], "plain FastAPI, CPU/request", ">= 1.0"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
