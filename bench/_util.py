"""Small helpers shared by the benchmarks: medians of interleaved repeats, and output lines."""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def interleaved(runs: int, *measures: Callable[[], float]) -> list[float]:
    """Run each measure ``runs`` times, alternating A, B, A, B ...; the median of each."""
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(runs):
        for i, measure in enumerate(measures):
            samples[i].append(measure())
    return [statistics.median(s) for s in samples]


def emit(name: str, value: float, unit: str) -> None:
    print(f"{name}: {value:.4g} {unit}", flush=True)


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_wrk() -> str | None:
    """The path of ``wrk``, installing Debian's package when running as root with apt-get."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    for command in (
        ["apt-get", "install", "-y", "-qq", "wrk"],
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "wrk"],
    ):
        subprocess.run(command, capture_output=True, timeout=300, check=False)
        if shutil.which("wrk"):
            break
    return shutil.which("wrk")


def start_server(
    script: Path, port: int, path: str, extra_env: dict[str, str] | None = None, limit: float = 30.0
) -> subprocess.Popen[bytes]:
    """Run ``script`` in its own process and return once ``GET path`` on ``port`` answers 200."""
    env = {**os.environ, **(extra_env or {})}
    process = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode()[-2000:] if process.stderr else ""
            raise RuntimeError(f"{script.name} exited with {process.returncode}: {stderr}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(request)
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return process
        except OSError:
            time.sleep(0.05)  # polling a server that is still booting, with a deadline
    process.kill()
    raise RuntimeError(f"{script.name} did not answer on port {port} within {limit:g} s")


def emit_ratio(name: str, ratio: float, floor: str, goal: str) -> None:
    """A ratio line that names what it is measured against and the figure it should reach."""
    print(f"{name}: {ratio:.4g} x  (floor: {floor}; goal: {goal})", flush=True)


CHILD_FLAG = "KEEL_BENCH_CHILD"


def across_processes(script: Path, processes: int) -> None:
    """Run ``script`` (which checks :data:`CHILD_FLAG`) in ``processes`` fresh interpreters, one
    after the other, and print the median of each figure they printed, with its range.

    Within one process the rounds agree closely, but fresh processes differ by several percent
    (memory layout, hash seeds, which core): the median over processes is the steadier figure."""
    values: dict[str, list[float]] = {}
    lines: dict[str, str] = {}
    for _ in range(processes):
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, CHILD_FLAG: "1"},
            capture_output=True,
            text=True,
            check=True,
        )
        for line in done.stdout.splitlines():
            name, _, rest = line.partition(": ")
            number, _, tail = rest.partition(" ")
            try:
                values.setdefault(name, []).append(float(number))
            except ValueError:
                continue
            lines.setdefault(name, tail)
    for name, samples in values.items():
        tail = lines[name]
        if "(floor:" in tail:
            tail = tail.replace(
                "(floor: ",
                f"(median of {processes} processes, range "
                f"{min(samples):.4g}-{max(samples):.4g}; floor as measured in the first: ",
                1,
            )
        print(f"{name}: {statistics.median(samples):.4g} {tail}", flush=True)
