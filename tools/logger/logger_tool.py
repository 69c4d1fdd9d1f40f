"""The ``logger`` tool: every log line of the process, attributed to the plugin code that wrote it.

Plugins call ``logger.info("...")``; libraries and Keel itself use the standard ``logging`` module.
Both end in the same place: ``setup()`` installs one handler on the root logger (removed again by
``shutdown()``), and every record it sees is handed to each sink as
``sink(level, message, timestamp, identity)``:

- ``level``: ``DEBUG`` / ``INFO`` / ``WARNING`` / ``ERROR`` / ``CRITICAL``;
- ``message``: the formatted text, followed by the traceback when the record carries one;
- ``timestamp``: ISO 8601 in UTC (``2025-01-31T12:00:00.123456+00:00``);
- ``identity``: ``current_identity_var`` where the line was logged (``<domain>.<Class>.<method>``
  inside a plugin's handler or hook), ``None`` outside plugin code;
- ``trace`` (only for a sink that takes a fifth parameter): ``(trace_id, span_id)`` of the
  OpenTelemetry span active where the line was logged, as lowercase hex (32 and 16 digits, the W3C
  ``traceparent`` spelling), or ``None`` when no span is recording (telemetry off, or outside any
  traced work). A four-parameter sink is called as before.

``LOG_LEVEL`` (default ``INFO``) sets the root logger's level. A default sink writes one readable
line per record to stderr in the format of :mod:`core.console`: ``12:00:05 ERROR identity: message``,
coloured on a terminal (``NO_COLOR``, ``FORCE_COLOR``), or one JSON object per line with
``LOG_FORMAT=json`` (which also carries the active span's ``trace_id`` and ``span_id``); outside
plugin code the line names the standard logger instead (``uvicorn.error``, ``kernel`` for
``keel.kernel``).

Sinks run synchronously in the thread that logged (often a worker thread), so they must be quick
and thread-safe. A sink that raises is reported once on stderr and keeps being called; it never
breaks the code that logged. A sink that itself logs does not recurse: lines logged from inside
a sink reach only the stderr sink. ``release_owner`` removes the sinks a plugin added.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.base_tool import BaseTool
from core.console import Style, format_line, log_format, short_name, style_for
from core.context import current_identity_var, current_plugin_var
from core.settings import SettingError, env_str

try:
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - the API is a dependency; without it lines carry no trace
    otel_trace = None  # type: ignore[assignment]

Sink = Callable[..., Any]
TraceIds = tuple[str, str]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_PLUGIN_LOGGER = "keel"


_style: list[Style] = []  # chosen at setup (a terminal check per line would be a system call)


def stderr_sink(
    level: str, message: str, timestamp: str, identity: str | None, trace: TraceIds | None = None
) -> None:
    """The default sink: ``12:00:05 LEVEL identity: message`` on stderr (:mod:`core.console`)."""
    if not _style:
        _style.append(style_for(sys.stderr))
    created = datetime.fromisoformat(timestamp).timestamp()
    sys.stderr.write(format_line(level, message, created, identity or "-", trace, style=_style[0]) + "\n")


def current_trace_ids() -> TraceIds | None:
    """``(trace_id, span_id)`` of the active OpenTelemetry span, in hex; ``None`` when there is none."""
    if otel_trace is None:
        return None
    context = otel_trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _takes_trace(sink: Sink) -> bool:
    try:
        parameters = list(inspect.signature(sink).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return True
    return sum(p.kind in positional for p in parameters) >= 5


class _SinkHandler(logging.Handler):
    """The root-logger handler: formats each record once and fans it out to the sinks."""

    keel_console = True  # core.console's early handler steps aside for this one

    def __init__(self, dispatch: Callable[..., None]) -> None:
        super().__init__()
        self.dispatch = dispatch

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not take the caller down
            message = f"{record.msg!r} (unformattable arguments {record.args!r})"
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            message = f"{message}\n{record.exc_text}"
        if record.stack_info:
            message = f"{message}\n{record.stack_info}"
        timestamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="microseconds")
        self.dispatch(
            record.levelname, message, timestamp, current_identity_var.get(), record.name, current_trace_ids()
        )

    def formatException(self, exc_info: Any) -> str:  # noqa: N802 - logging's own name
        return logging.Formatter().formatException(exc_info)


class LoggerTool(BaseTool):
    """Log lines with levels; sinks receive (level, message, timestamp, identity[, trace])."""

    name = "logger"

    def __init__(self) -> None:
        self._log = logging.getLogger(_PLUGIN_LOGGER)
        self._sinks: tuple[tuple[Sink, str | None, bool], ...] = ((stderr_sink, None, True),)
        self._lock = threading.Lock()
        self._reported: set[int] = set()
        self._local = threading.local()
        self._handler: _SinkHandler | None = None
        self._previous_level: int | None = None

    async def setup(self) -> None:
        level = env_str("LOG_LEVEL", "INFO").upper()
        if level not in LEVELS:
            raise SettingError("LOG_LEVEL", level, f"one of {', '.join(LEVELS)}")
        log_format()  # a bad LOG_FORMAT is refused here, with the fix
        _style[:] = [style_for(sys.stderr)]
        root = logging.getLogger()
        self._previous_level = root.level
        root.setLevel(level)
        self._handler = _SinkHandler(self._dispatch)
        root.addHandler(self._handler)

    async def shutdown(self) -> None:
        root = logging.getLogger()
        if self._handler is not None:
            root.removeHandler(self._handler)
            self._handler = None
        if self._previous_level is not None:
            root.setLevel(self._previous_level)
            self._previous_level = None

    # -- logging -------------------------------------------------------------------------------

    def debug(self, message: str, *args: Any) -> None:
        """Log at DEBUG (``%``-style ``args``, as in the ``logging`` module)."""
        self._log.debug(message, *args)

    def info(self, message: str, *args: Any) -> None:
        """Log at INFO."""
        self._log.info(message, *args)

    def warning(self, message: str, *args: Any) -> None:
        """Log at WARNING."""
        self._log.warning(message, *args)

    def error(self, message: str, *args: Any) -> None:
        """Log at ERROR."""
        self._log.error(message, *args)

    def critical(self, message: str, *args: Any) -> None:
        """Log at CRITICAL."""
        self._log.critical(message, *args)

    def exception(self, message: str, *args: Any) -> None:
        """Log at ERROR with the exception being handled and its traceback."""
        self._log.error(message, *args, exc_info=True)

    # -- sinks ---------------------------------------------------------------------------------

    def add_sink(self, sink: Sink) -> None:
        """Call ``sink(level, message, timestamp, identity)`` for every line from now on, with the
        line's ``trace`` ids as a fifth argument when the sink takes one."""
        if not callable(sink):
            raise TypeError(f"a log sink must be callable, got {sink!r}")
        entry = (sink, current_plugin_var.get(), _takes_trace(sink))
        with self._lock:
            self._sinks = (*self._sinks, entry)

    def remove_sink(self, sink: Sink) -> None:
        """Stop calling ``sink`` (no error if it was not added)."""
        with self._lock:
            self._sinks = tuple(entry for entry in self._sinks if entry[0] != sink)

    def release_owner(self, owner: str) -> None:
        with self._lock:
            self._sinks = tuple(entry for entry in self._sinks if entry[1] != owner)

    def _dispatch(
        self,
        level: str,
        message: str,
        timestamp: str,
        identity: str | None,
        source: str,
        trace: TraceIds | None = None,
    ) -> None:
        label = identity or short_name(source)
        local = self._local
        if getattr(local, "dispatching", False):
            # A sink logged: only stderr gets that line, so a sink can never feed itself.
            stderr_sink(level, message, timestamp, label, trace)
            return
        local.dispatching = True
        try:
            for sink, _, takes_trace in self._sinks:
                try:
                    who = label if sink is stderr_sink else identity
                    if takes_trace:
                        sink(level, message, timestamp, who, trace)
                    else:
                        sink(level, message, timestamp, who)
                except Exception as exc:
                    self._report(sink, exc)
        finally:
            local.dispatching = False

    def _report(self, sink: Sink, exc: Exception) -> None:
        key = id(sink)
        if key in self._reported:
            return
        self._reported.add(key)
        sys.stderr.write(
            f"keel logger: sink {sink!r} raised {type(exc).__name__}: {exc}; "
            "it keeps being called, and further failures are not reported\n"
        )
