"""The microkernel's own error types.

Two families: errors about tools and boot (which the kernel and the ToolProxy act on), and request
errors a plugin raises to answer a caller (which the ``http`` tool maps to a status code and the
``{"error": {"kind", "message", "request_id"}}`` envelope). All inherit :class:`KeelError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from core.contracts.errors import KeelError, StoreValueError, ToolArgumentError

__all__ = [
    "ConflictError",
    "ExitAttemptError",
    "ErrorKind",
    "ForbiddenError",
    "InvalidInputError",
    "KeelError",
    "KernelBootError",
    "NotFoundError",
    "RequestError",
    "ServiceUnavailableError",
    "ToolNotConfiguredError",
    "ToolNotFoundError",
    "TooManyRequestsError",
    "ToolUnavailableError",
    "UnauthorizedError",
    "is_caller_error",
]


class ToolUnavailableError(KeelError):
    """A tool's infrastructure is unreachable: the ToolProxy marks the tool DEAD at once.

    Tools subclass it for their own systems (a database connection refused, say), so the kernel
    can tell an outage from a business error without knowing the tool.
    """


class ToolNotConfiguredError(KeelError):
    """Raised by a tool's ``setup()`` when it is present but deliberately not configured.

    The tool is then OFF, not DEAD, and the message must say what to set to turn it on.
    """


class ToolNotFoundError(KeelError, LookupError):
    """No tool is registered under the requested name."""


class KernelBootError(KeelError):
    """The project root cannot be booted at all."""


class ExitAttemptError(KeelError):
    """Plugin or tool code raised ``SystemExit`` or ``KeyboardInterrupt`` (a ``sys.exit()`` in a
    hook, say): a part may not end the process, so the kernel makes it that part's failure."""

    def __init__(self, exc: BaseException, where: str) -> None:
        code = f"({exc.code!r})" if isinstance(exc, SystemExit) and exc.code is not None else "()"
        super().__init__(f"{where} raised {type(exc).__name__}{code}: a part cannot end the process")
        self.original = exc


class ErrorKind(StrEnum):
    """The closed set of request error kinds a caller can branch on."""

    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    FORBIDDEN = "forbidden"
    UNAUTHORIZED = "unauthorized"
    INVALID = "invalid"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"
    BAD_REQUEST = "bad_request"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INTERNAL = "internal"


class RequestError(KeelError):
    """An error a plugin raises to answer a request with a specific status and kind.

    ``fields`` (each ``{"field", "location", "message"}``) name the offending inputs and go into the
    envelope as ``error.fields``; ``headers`` are added to the response (``WWW-Authenticate``, say).
    Both are taken here so raising one is a single typed expression, not an instance patched after.
    """

    status_code: int = 400
    kind: ErrorKind = ErrorKind.BAD_REQUEST

    def __init__(
        self,
        message: str = "",
        *,
        fields: Sequence[Mapping[str, Any]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.fields: list[dict[str, Any]] | None = (
            None if fields is None else [dict(field) for field in fields]
        )
        self.headers: dict[str, str] = dict(headers) if headers else {}


class NotFoundError(RequestError):
    status_code = 404
    kind = ErrorKind.NOT_FOUND


class ConflictError(RequestError):
    status_code = 409
    kind = ErrorKind.CONFLICT


class ForbiddenError(RequestError):
    status_code = 403
    kind = ErrorKind.FORBIDDEN


class UnauthorizedError(RequestError):
    status_code = 401
    kind = ErrorKind.UNAUTHORIZED


class InvalidInputError(RequestError):
    status_code = 422
    kind = ErrorKind.INVALID


class TooManyRequestsError(RequestError):
    """The caller must slow down; ``retry_after`` (whole seconds) becomes the Retry-After header."""

    status_code = 429
    kind = ErrorKind.RATE_LIMITED

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(
            message, headers={"Retry-After": str(retry_after)} if retry_after is not None else None
        )
        self.retry_after = retry_after


class ServiceUnavailableError(RequestError):
    status_code = 503
    kind = ErrorKind.UNAVAILABLE


CALLER_KINDS = frozenset({ErrorKind.INVALID, ErrorKind.BAD_REQUEST, ErrorKind.NOT_FOUND, ErrorKind.CONFLICT})
"""The ``kind`` (or ``reason``) values that say the caller asked wrongly, not that a tool failed."""


def is_caller_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the caller's mistake (bad input, not found, a conflict), not the tool's.

    The ToolProxy never counts such an error toward DEAD. In order: a ``ToolUnavailableError`` is
    never one; an exception may declare itself with a boolean ``caller_error`` attribute (how a tool
    classifies its own kinds, a database's unique violation say, without ``core`` knowing the tool);
    the port errors for a bad argument are; a ``KeelError`` is when its ``kind`` or ``reason`` is
    one of :data:`CALLER_KINDS`.
    """
    if isinstance(exc, ToolUnavailableError):
        return False
    declared = getattr(exc, "caller_error", None)
    if isinstance(declared, bool):
        return declared
    if isinstance(exc, ToolArgumentError | StoreValueError):
        return True
    if not isinstance(exc, KeelError):
        return False
    for attr in ("kind", "reason"):
        value = getattr(exc, attr, None)
        if value is not None and str(value) in CALLER_KINDS:
            return True
    return False
