"""When a schedule fires next: fixed intervals, and cron expressions through ``cronsim``.

A spec is stored as text in the schedules table (``every:30`` or ``cron:Europe/Paris:0 3 * * *``), so
a changed schedule is recognised after a restart and its next fire time is recomputed.

- ``every`` keeps its phase: after the tick due at ``d`` the next is ``d + k * interval`` for the
  smallest ``k`` that lands after ``now``, so the ticks missed while no process ran collapse into
  one (see the catch-up policy in :mod:`tools.scheduler.scheduler_tool`).
- ``cron`` is evaluated in ``tz`` (an IANA name, default UTC), daylight-saving changes included, by
  cronsim, and the next fire time is the first match after ``max(due, now)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError


@dataclass(frozen=True)
class Every:
    interval: float

    def __post_init__(self) -> None:
        if not self.interval > 0:
            raise ValueError(f"an interval must be positive, got {self.interval!r}")

    @property
    def text(self) -> str:
        return f"every:{self.interval!r}"

    def first(self, now: float) -> float:
        return now + self.interval

    def after(self, due: float, now: float) -> float:
        if due + self.interval > now:
            return due + self.interval
        return due + (math.floor((now - due) / self.interval) + 1) * self.interval


@dataclass(frozen=True)
class Cron:
    expr: str
    tz: str = "UTC"

    def __post_init__(self) -> None:
        try:
            zone = ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {self.tz!r}") from exc
        try:
            CronSim(self.expr, datetime.now(zone))
        except CronSimError as exc:
            raise ValueError(f"bad cron expression {self.expr!r}: {exc}") from exc

    @property
    def text(self) -> str:
        return f"cron:{self.tz}:{self.expr}"

    def first(self, now: float) -> float:
        return self._next(now)

    def after(self, due: float, now: float) -> float:
        return self._next(max(due, now))

    def _next(self, t: float) -> float:
        zone = ZoneInfo(self.tz)
        start = datetime.fromtimestamp(t, UTC).astimezone(zone)
        return next(CronSim(self.expr, start)).timestamp()


Spec = Every | Cron
