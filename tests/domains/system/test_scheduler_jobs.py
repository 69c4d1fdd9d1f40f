"""The scheduler in a booted service: a plugin's schedule fires under the kernel's serving loop, the
dump and ``/system/scheduler`` show schedules and failed jobs, jobs are cancelled and re-run over
HTTP, and unloading the plugin stops its schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kit import make_root, serving, until, write

PLUGIN = """
from core import BasePlugin


class Nightly(BasePlugin):
    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.ticks = 0

    async def on_boot(self):
        self.scheduler.every(0.05, self.tick)
        self.scheduler.on_job("report", self.report)
        await self.scheduler.after(0, "report", {"to": "ops"}, key="first-report")

    async def tick(self, job):
        self.ticks += 1

    async def report(self, job):
        raise RuntimeError(f"mail server down for {job['payload']['to']}")
"""


async def test_schedules_and_failed_jobs_over_http_and_in_the_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDULER_URL", "sqlite:///data/scheduler.db")
    monkeypatch.setenv("SCHEDULER_POLL_SECONDS", "0.05")
    monkeypatch.setenv("SCHEDULER_RETRY_BACKOFF_SECONDS", "0")
    monkeypatch.setenv("SCHEDULER_MAX_ATTEMPTS", "2")
    root = make_root(tmp_path, tools=("http", "logger", "system", "scheduler"), domains=("system",))
    plugin_file = write(root, "domains/demo/plugins/nightly.py", PLUGIN)
    async with serving(root) as (kernel, base), httpx.AsyncClient(base_url=base) as api:
        nightly: Any = kernel.plugins["demo.Nightly"].instance  # a plugin the test writes: not importable
        await until(lambda: nightly.ticks >= 3, "the plugin's schedule fires under the serving loop")

        async def failed() -> list[dict[str, Any]]:
            jobs: list[dict[str, Any]] = (
                await api.get("/system/scheduler/jobs", params={"status": "failed"})
            ).json()["jobs"]
            return jobs

        async def any_failed() -> bool:
            return bool(await failed())

        await until(any_failed, "the failing job ends up failed")
        [job] = await failed()
        assert job["attempts"] == 2 and job["error"] == "RuntimeError: mail server down for ops"

        overview = (await api.get("/system/scheduler")).json()
        [schedule] = overview["schedules"]
        assert schedule["name"] == "demo.Nightly.tick" and schedule["plugin"] == "demo.Nightly"
        assert schedule["next_fire"] > 0 and schedule["last_status"] == "done"

        async def dumped() -> bool:
            capability = (await api.get("/system/status")).json()["kernel"]["capabilities"]["scheduler"]
            return bool(capability.get("failed")) and bool(capability.get("schedules"))

        await until(dumped, "the dump shows the schedule and the failed job")

        assert (await api.post(f"/system/scheduler/jobs/{job['id']}/cancel")).status_code == 409
        rerun = await api.post(f"/system/scheduler/jobs/{job['id']}/rerun")
        assert rerun.status_code == 200 and rerun.json()["attempts"] == 0
        assert (await api.get("/system/scheduler/jobs/nope")).status_code == 404
        assert (await api.get("/system/scheduler/jobs", params={"status": "odd"})).status_code == 422

        async def failed_again() -> bool:
            current: dict[str, object] = (await api.get(f"/system/scheduler/jobs/{job['id']}")).json()
            return current["status"] == "failed" and current["attempts"] == 2

        await until(failed_again, "the re-run job runs its attempts again")

        plugin_file.unlink()
        await kernel.plugin_host.apply([plugin_file])
        assert "demo.Nightly" not in kernel.plugins
        assert (await api.get("/system/scheduler")).json()["schedules"] == []
