"""The scheduler's errors."""

from __future__ import annotations

from core.errors import ToolUnavailableError


class SchedulerUnavailableError(ToolUnavailableError):
    """The scheduler's database cannot be reached or used."""
