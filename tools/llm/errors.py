"""The errors the ``llm`` tool raises: one base, a closed ``reason``, and a retry verdict on each.

No ``httpx`` exception and no raw JSON error leaves the tool. Every failure is an :class:`LLMError`
whose ``reason`` (:class:`LLMErrorReason`, a closed set) a caller can branch on, and whose
``error_class`` tells :func:`core.contracts.errors.classify` (and through it the ``retry()`` and
``fallback()`` policies) whether trying again can help:

* transient: a timeout, a dropped or refused connection, a 408, a 429, a 5xx, an error the server
  reported inside a stream;
* permanent: a 400, 401, 403, 404, 422 and any other 4xx, a response that breaks the wire format,
  and "not configured".

Where the failure happened matters as much as what it was. A failure before the first ``Delta``
reached the caller is raised as itself, so ``retry()`` may repeat the call (nothing was consumed).
A failure after that is an :class:`LLMStreamInterrupted`, whatever caused it: the caller already
holds part of an answer, repeating the call would send those tokens twice, and the type says so.
It keeps the cause (``cause``, also ``__cause__``), how many deltas had arrived, and the cause's
retry verdict (a caller that restarts the whole step may use it).

:class:`LLMUnavailableError` (the server refused the connection or could not be resolved) is also
a ``ToolUnavailableError``, so the ToolProxy marks ``llm`` DEAD until a call succeeds again.
:class:`LLMNotConfiguredError` is a ``ServiceUnavailableError``: escaping an HTTP handler it
answers 503 with the message saying what to set.
"""

from __future__ import annotations

from enum import StrEnum

from core.contracts.errors import ErrorClass
from core.errors import KeelError, ServiceUnavailableError, ToolUnavailableError


class LLMErrorReason(StrEnum):
    """What went wrong talking to the model, in words that do not depend on the server."""

    NOT_CONFIGURED = "not_configured"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    """The server could not be reached (connection refused, name not resolved)."""
    CONNECTION = "connection"
    """The connection broke or the server closed it before answering."""
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    AUTHENTICATION = "authentication"
    FORBIDDEN = "forbidden"
    BAD_REQUEST = "bad_request"
    MALFORMED_RESPONSE = "malformed_response"
    STREAM_INTERRUPTED = "stream_interrupted"


_TRANSIENT_REASONS = frozenset(
    {
        LLMErrorReason.TIMEOUT,
        LLMErrorReason.UNAVAILABLE,
        LLMErrorReason.CONNECTION,
        LLMErrorReason.RATE_LIMITED,
        LLMErrorReason.SERVER_ERROR,
    }
)


class LLMError(KeelError):
    """Any failure of an ``llm`` call; ``status_code`` is the server's HTTP status when there was one."""

    status_code: int | None

    def __init__(self, reason: LLMErrorReason, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status_code = status_code

    @property
    def error_class(self) -> ErrorClass:
        return ErrorClass.TRANSIENT if self.reason in _TRANSIENT_REASONS else ErrorClass.PERMANENT


class LLMNotConfiguredError(LLMError, ServiceUnavailableError):  # type: ignore[misc]
    """The tool is OFF: no server was configured. The message says what to set.

    As a request error its ``kind`` is ``unavailable`` and its status 503; ``reason`` is
    ``not_configured``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(LLMErrorReason.NOT_CONFIGURED, message, status_code=503)

    @property
    def error_class(self) -> ErrorClass:
        # Declared, because the 503 a ServiceUnavailableError carries would otherwise read as transient.
        return ErrorClass.PERMANENT


class LLMUnavailableError(LLMError, ToolUnavailableError):
    """The server cannot be reached at all; the proxy marks ``llm`` DEAD until a call succeeds."""

    def __init__(self, message: str) -> None:
        super().__init__(LLMErrorReason.UNAVAILABLE, message)


class LLMRateLimitedError(LLMError):
    """429: the server asked us to slow down; ``retry_after`` is its hint in seconds, when given."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(LLMErrorReason.RATE_LIMITED, message, status_code=429)
        self.retry_after = retry_after


class LLMStreamInterrupted(LLMError):
    """The answer broke off after ``deltas_received`` deltas had reached the caller."""

    def __init__(self, cause: LLMError, deltas_received: int) -> None:
        super().__init__(
            LLMErrorReason.STREAM_INTERRUPTED,
            f"the model's stream broke off after {deltas_received} delta(s) had been delivered, so the "
            f"call cannot simply be repeated: {cause}",
            status_code=cause.status_code,
        )
        self.cause = cause
        self.deltas_received = deltas_received

    @property
    def error_class(self) -> ErrorClass:
        return self.cause.error_class


def error_for_status(status: int, detail: str, *, retry_after: float | None = None) -> LLMError:
    """The error for an HTTP error status from the server, with the server's own explanation."""
    message = (
        f"the model server answered {status}: {detail}" if detail else f"the model server answered {status}"
    )
    if status == 429:
        return LLMRateLimitedError(message, retry_after=retry_after)
    if status == 408:
        return LLMError(LLMErrorReason.TIMEOUT, message, status_code=status)
    if status >= 500:
        return LLMError(LLMErrorReason.SERVER_ERROR, message, status_code=status)
    if status == 401:
        return LLMError(LLMErrorReason.AUTHENTICATION, f"{message} (check LLM_API_KEY)", status_code=status)
    if status == 403:
        return LLMError(LLMErrorReason.FORBIDDEN, message, status_code=status)
    return LLMError(LLMErrorReason.BAD_REQUEST, message, status_code=status)
