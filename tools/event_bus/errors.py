"""The errors the ``event_bus`` tool raises to its callers."""

from __future__ import annotations

from core.contracts.errors import ErrorClass
from core.errors import KeelError, ToolUnavailableError


class EventBusError(KeelError):
    """Base of every event bus error."""


class EventPayloadError(EventBusError, ValueError):
    """``publish`` (or a reply) was given something that is not a JSON value; nothing was sent."""

    caller_error = True
    error_class = ErrorClass.PERMANENT


class EventRequestTimeout(EventBusError, TimeoutError):
    """``request`` got no reply within its timeout."""

    error_class = ErrorClass.TRANSIENT


class EventNoReplyError(EventBusError):
    """``request`` found nobody to answer: no subscriber, or every one returned None or failed."""

    error_class = ErrorClass.PERMANENT


class EventBusUnavailableError(EventBusError, ToolUnavailableError):
    """The broker carrying events (Redis) cannot be reached; ``publish`` did not hand the event over."""

    error_class = ErrorClass.TRANSIENT
