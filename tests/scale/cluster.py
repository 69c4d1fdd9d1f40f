"""Several real Keel processes on one root, sharing PostgreSQL and Redis: what a load balancer fronts.

Each :class:`KeelProcess` runs ``tests/scale/keel_process.py`` with ``PORT=0`` (the system picks a
free port) and is ready once its log says ``serving on http://...``, within a bound. Its output
is kept, so a failing test can show what every process said. :meth:`Cluster.start` starts
several at once, so their boots (and migrations) really overlap.

The processes get a clean environment: the suite's own settings for the tools under test are
removed, and the cluster's (database, Redis, short claim and lease times) are set.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "keel_process.py"
SERVING = re.compile(r"serving on (http://\S+)")
BOOT_BOUND = 40.0
STOP_BOUND = 15.0
CLEARED = (
    "EVENT_BUS_",
    "STORE_",
    "CHECKPOINT_",
    "DATABASE_URL",
    "AGENTS_",
    "AGENT_",
    "LLM_",
    "OTEL_",
    "AUTH_",
    "PLUGINS_WATCH",
    "SCALE_",
    "PORT",
    "HOST",
    "LOG_LEVEL",
)


class KeelProcess:
    """One Keel process; ``url`` once it serves."""

    def __init__(self, name: str, root: Path, env: dict[str, str]) -> None:
        self.name = name
        self.root = root
        self.env = {**env, "SCALE_NAME": name}
        self.lines: list[str] = []
        self.url = ""
        self._serving = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._terminated = False

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(self.root)],
            env=self.env,
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self._reader = threading.Thread(target=self._read, name=f"keel-{self.name}-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for raw in self._process.stdout:
            line = raw.rstrip("\n")
            self.lines.append(line)
            if not self._serving.is_set() and (found := SERVING.search(line)):
                self.url = found.group(1)
                self._serving.set()
        self._serving.set()  # the output ended: whoever waits learns it now, not at the bound

    def wait_serving(self, within: float = BOOT_BOUND) -> str:
        if not self._serving.wait(within) or not self.url:
            raise AssertionError(f"{self.name} did not serve within {within:g}s:\n{self.output()}")
        return self.url

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no ``finally`` runs; whatever it held is left as it was."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(STOP_BOUND)
        self._release()

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM), once: a second SIGTERM may land after its loop has closed."""
        if self._process is not None and self._process.poll() is None and not self._terminated:
            self._terminated = True
            self._process.send_signal(signal.SIGTERM)

    def stop(self) -> int | None:
        """SIGTERM and wait for a clean exit (SIGKILL after the bound); the exit code."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            self.terminate()
            try:
                process.wait(STOP_BOUND)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_BOUND)
        self._release()
        return process.returncode

    def _release(self) -> None:
        """Finish reading the output and close the pipe."""
        if self._reader is not None:
            self._reader.join(STOP_BOUND)
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()

    def output(self) -> str:
        return "\n".join(f"[{self.name}] {line}" for line in self.lines[-200:])


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    processes: dict[str, KeelProcess] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)

    @classmethod
    def environment(cls, settings: dict[str, str]) -> dict[str, str]:
        base = {key: value for key, value in os.environ.items() if not key.startswith(CLEARED)}
        return {**base, "PORT": "0", "HOST": "127.0.0.1", "LOG_LEVEL": "INFO", **settings}

    def start(self, *names: str) -> list[KeelProcess]:
        """Start the named processes together and wait until every one serves."""
        started = [KeelProcess(name, self.root, self.env) for name in names]
        for process in started:
            self.processes[process.name] = process
            process.start()
        for process in started:
            process.wait_serving()
        return started

    def kill(self, name: str) -> None:
        """SIGKILL one process (see :meth:`KeelProcess.kill`)."""
        self.processes[name].kill()
        self.killed.add(name)

    def clean_exits(self) -> dict[str, int]:
        """The exit codes a clean :meth:`stop_all` gives: 0, and -9 for the processes killed."""
        return {name: -signal.SIGKILL if name in self.killed else 0 for name in self.processes}

    def __getitem__(self, name: str) -> KeelProcess:
        return self.processes[name]

    def live(self) -> list[KeelProcess]:
        return [p for p in self.processes.values() if p.running]

    def by_pid(self, pid: int) -> KeelProcess:
        return next(p for p in self.processes.values() if p.pid == pid)

    def stop_all(self) -> dict[str, int | None]:
        for process in self.processes.values():
            process.terminate()  # all at once, so they shut down side by side
        return {name: process.stop() for name, process in self.processes.items()}

    def output(self) -> str:
        return "\n".join(process.output() for process in self.processes.values())
