"""SSE fan-out: 100 clients on a log stream while the service logs 1,000 lines/s.

Two servers, each in its own process on loopback uvicorn (uvloop, httptools): Keel's http tool
serving ``client_events`` of the system domain's log broadcast (the code behind
``/system/logs/stream``) through Keel's SSE writer, and the floor, a plain ASGI fan-out of the same
lines (each line encoded once, one queue per client, one ``send()`` per line). Both publish 10 lines
every 10 ms. 100 clients read raw sockets in a separate process (their CPU is not counted); the
server's CPU is read from ``/proc`` over the measured window. Runs alternate, medians printed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench._util import emit, emit_ratio, free_port, start_server  # noqa: E402

CLIENTS = 100
RATE = 1000
WARMUP = 1.5
WINDOW = 3.0
RUNS = 3

PRODUCER = """
import asyncio, time

async def produce(publish):
    seq = 0
    tick = time.monotonic()
    while True:
        tick += 0.01
        for _ in range(10):
            seq += 1
            publish(f"{{seq}} {{time.time():.6f}}")
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
"""

KEEL_MAIN = (
    """
import asyncio, os, sys
sys.path.insert(0, {project!r})
from tools.http.http_tool import HttpTool
from domains.system.plugins.logs_stream import LogBroadcast, client_events
"""
    + PRODUCER
    + """
async def main():
    http = HttpTool()
    await http.setup()
    broadcast = LogBroadcast(1000, 1000)
    http.add_endpoint("/ready", "GET", lambda data, context: {{"ok": True}})
    http.add_sse_endpoint("/system/logs/stream", lambda data, context: client_events(broadcast, None))
    publish = lambda message: broadcast.publish("INFO", message, "t", "bench.Logs.run")
    asyncio.get_running_loop().create_task(produce(publish))
    await http.serve(asyncio.Event())

import uvloop
uvloop.run(main())
"""
)

FLOOR_MAIN = (
    """
import asyncio, json, uvicorn
"""
    + PRODUCER
    + """
queues = set()
HEADERS = [(b"content-type", b"text/event-stream")]
last = 0

def publish(message):
    global last
    last += 1
    data = json.dumps({{"id": last, "level": "INFO", "message": message}}, separators=(",", ":"))
    chunk = f"id: {{last}}\\ndata: {{data}}\\n\\n".encode()
    for queue in queues:
        queue.put_nowait(chunk)

async def app(scope, receive, send):
    if scope["path"] == "/ready":
        await send({{"type": "http.response.start", "status": 200, "headers": []}})
        await send({{"type": "http.response.body", "body": b"ok"}})
        return
    queue = asyncio.Queue(1000)
    queues.add(queue)
    await send({{"type": "http.response.start", "status": 200, "headers": HEADERS}})
    try:
        while True:
            await send({{"type": "http.response.body", "body": await queue.get(), "more_body": True}})
    finally:
        queues.discard(queue)

async def main():
    asyncio.get_running_loop().create_task(produce(publish))
    config = uvicorn.Config(app, host="127.0.0.1", port={port}, loop="uvloop", http="httptools",
                            access_log=False, lifespan="off", log_level="warning")
    await uvicorn.Server(config).serve()

import uvloop
uvloop.run(main())
"""
)

CLIENT_MAIN = """
import asyncio, json, re, sys, time
port, clients, start, end = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
MESSAGE = re.compile(rb'"message":"(\\d+) ([0-9.]+)"')
DROPPED = re.compile(rb'"dropped":(\\d+)')

async def reader(results):
    # Cheap on purpose (counts, and one parsed line per read): the client must not be the limit.
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /system/logs/stream HTTP/1.1\\r\\nHost: b\\r\\n\\r\\n")
    first = last = None
    count, dropped, lat, tail = 0, 0, [], b""
    while time.time() < end:
        try:
            data = await asyncio.wait_for(r.read(262144), end - time.time())
        except (asyncio.TimeoutError, ValueError):
            break
        if not data:
            break
        now = time.time()
        data = tail + data
        cut = data.rfind(b"\\n\\n") + 2
        data, tail = data[:cut], data[cut:]
        found = MESSAGE.findall(data)
        if not found:
            continue
        seq, sent = int(found[-1][0]), float(found[-1][1])
        if first is None:
            first = int(found[0][0])
        last = seq
        if start <= sent:
            count += len(found)
            lat.append(now - sent)
        else:
            first = None
        dropped += sum(int(n) for n in DROPPED.findall(data))
    w.close()
    results.append((count, (last - first + 1) if first is not None and last is not None else 0, dropped, lat))

async def main():
    results = []
    await asyncio.gather(*(reader(results) for _ in range(clients)))
    lat = sorted(x for *_, l in results for x in l)
    print(json.dumps({
        "received": sum(r[0] for r in results), "expected": sum(r[1] for r in results),
        "dropped": sum(r[2] for r in results),
        "p50": lat[len(lat) // 2] if lat else None, "p99": lat[int(len(lat) * 0.99)] if lat else None,
    }))

asyncio.run(main())
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(script: Path, port: int, env: dict[str, str]) -> dict[str, float]:
    server = start_server(script, port, "/ready", env)
    try:
        start = time.time() + WARMUP
        end = start + WINDOW
        client_script = script.with_name("clients.py")
        client_script.write_text(CLIENT_MAIN)
        clients = subprocess.Popen(
            [sys.executable, str(client_script), str(port), str(CLIENTS), str(start), str(end)],
            stdout=subprocess.PIPE,
        )
        time.sleep(max(0.0, start - time.time()))  # the window is wall-clock time both sides share
        before = cpu_seconds(server.pid)
        time.sleep(max(0.0, end - time.time()))
        used = cpu_seconds(server.pid) - before
        out, _ = clients.communicate(timeout=60)
        result = json.loads(out)
        result["cores"] = used / WINDOW
        result["ratio"] = result["received"] / result["expected"] if result["expected"] else 0.0
        return result
    finally:
        server.kill()
        server.wait()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        samples: dict[str, list[dict[str, float]]] = {"keel": [], "floor": []}
        for _ in range(RUNS):
            for name, source in (("keel", KEEL_MAIN), ("floor", FLOOR_MAIN)):
                port = free_port()
                script = Path(tmp) / f"{name}.py"
                script.write_text(source.format(project=str(PROJECT), port=port))
                env = {"PORT": str(port), "HTTP_MAX_STREAMS_PER_CLIENT": "1000"}
                samples[name].append(measure(script, port, env))
        for name, runs in samples.items():
            for key, unit in (("ratio", "delivered"), ("dropped", "lines"), ("cores", "core")):
                values = [float(r[key] or 0) for r in runs]
                emit(
                    f"sse_{name}_{key}",
                    statistics.median(values),
                    f"{unit} (range {min(values):.3g}-{max(values):.3g})",
                )
            for key in ("p50", "p99"):
                values = [float(r[key] or 0) * 1000 for r in runs]
                emit(
                    f"sse_{name}_{key}",
                    statistics.median(values),
                    f"ms (range {min(values):.3g}-{max(values):.3g})",
                )
        keel = samples["keel"]
        emit_ratio(
            "sse_delivered", statistics.median(r["ratio"] for r in keel), "every line to every client", "1.0"
        )
        emit_ratio(
            "sse_cores_vs_floor",
            statistics.median(r["cores"] for r in keel)
            / max(1e-9, statistics.median(r["cores"] for r in samples["floor"])),
            "plain ASGI fan-out, same run",
            "under 0.35 core absolute",
        )
        print("# goal: p99 under 50 ms, under 0.35 core, nothing lost", flush=True)


if __name__ == "__main__":
    main()
