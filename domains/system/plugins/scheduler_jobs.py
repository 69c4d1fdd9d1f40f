"""The scheduler over HTTP: its schedules and jobs, and cancelling or re-running a job.

- ``GET /system/scheduler``: what the dump shows (schedules with plugin, next fire time and last
  result; jobs per status; the latest failed jobs with their errors).
- ``GET /system/scheduler/jobs?status=&name=&limit=``: stored jobs, newest due first.
- ``GET /system/scheduler/jobs/{job_id}``: one job (404 when unknown).
- ``POST /system/scheduler/jobs/{job_id}/cancel``: a pending or running job -> cancelled (409 when it
  has already finished).
- ``POST /system/scheduler/jobs/{job_id}/rerun``: a done, failed or cancelled job runs again now
  with fresh attempts (409 while it is pending or running).

Admin-only once authentication is configured. This plugin is what composes the ``http`` and
``scheduler`` tools (tools never import each other); without a scheduler it registers nothing.
"""

from __future__ import annotations

from typing import Any

from core import BasePlugin, ConflictError, InvalidInputError, NotFoundError

STATUSES = ("pending", "running", "done", "failed", "cancelled")


class SchedulerJobsPlugin(BasePlugin):
    def __init__(self, http: Any, scheduler: Any = None) -> None:
        self.http = http
        self.scheduler = scheduler

    def on_boot(self) -> None:
        if self.scheduler is None:
            return
        add = self.http.add_endpoint
        add("/system/scheduler", "GET", self.overview, tags=["system"], auth="admin")
        add("/system/scheduler/jobs", "GET", self.jobs, tags=["system"], auth="admin")
        add("/system/scheduler/jobs/{job_id}", "GET", self.job, tags=["system"], auth="admin")
        add("/system/scheduler/jobs/{job_id}/cancel", "POST", self.cancel, tags=["system"], auth="admin")
        add("/system/scheduler/jobs/{job_id}/rerun", "POST", self.rerun, tags=["system"], auth="admin")

    async def overview(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Schedules, job counts by status and the latest failed jobs."""
        status: dict[str, Any] = await self.scheduler.status()
        return status

    async def jobs(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Stored jobs, newest due first (``?status=``, ``?name=``, ``?limit=`` up to 1000)."""
        status = data.get("status") or None
        if status is not None and status not in STATUSES:
            raise InvalidInputError(f"status must be one of {', '.join(STATUSES)}")
        raw = str(data.get("limit") or "100")
        if not raw.isdigit() or not 1 <= int(raw) <= 1000:
            raise InvalidInputError("limit must be a whole number from 1 to 1000")
        jobs = await self.scheduler.jobs(status=status, name=data.get("name") or None, limit=int(raw))
        return {"jobs": jobs}

    async def job(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """One job."""
        job: dict[str, Any] | None = await self.scheduler.job(data["job_id"])
        if job is None:
            raise NotFoundError(f"no job {data['job_id']!r}")
        return job

    async def cancel(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Cancel a pending or running job."""
        await self._known(data["job_id"])
        if not await self.scheduler.cancel(data["job_id"]):
            raise ConflictError(f"job {data['job_id']!r} has already finished")
        return await self._known(data["job_id"])

    async def rerun(self, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Run a finished job again now."""
        await self._known(data["job_id"])
        if not await self.scheduler.rerun(data["job_id"]):
            raise ConflictError(f"job {data['job_id']!r} is still pending or running")
        return await self._known(data["job_id"])

    async def _known(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] | None = await self.scheduler.job(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id!r}")
        return job
