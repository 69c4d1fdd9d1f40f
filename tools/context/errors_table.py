"""Which exception a handler raises for which answer: the table the reference and AI_CONTEXT.md show.

The request errors are read from ``core.errors`` itself (every ``RequestError`` subclass, with its
``status_code`` and ``kind``), so a new error class or a changed status shows up in the next
``make docs``. The rows after them are the ``http`` tool's envelope rules for what is not a request
error (``tools/http/envelope.py``); the reference tests raise each one from a route and compare the
answer with this table.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from core import errors


@dataclass(frozen=True)
class ErrorRow:
    raised: str
    """What the handler raises (or what happens), as the table shows it."""
    status: int
    kind: str
    note: str


ENVELOPE_RULES = (
    ErrorRow("a body that fails `request_model` (or `query_model`)", 422, "invalid", "`fields` names each"),
    ErrorRow("a body that is not JSON", 400, "bad_request", ""),
    ErrorRow(
        "`ToolUnavailableError` (a tool's system is down, e.g. the database)",
        503,
        "unavailable",
        "with `Retry-After`; the tool's text is logged, not sent",
    ),
    ErrorRow("any other exception (a bug)", 500, "internal", "generic message; traceback in the log"),
)


def request_error_classes() -> list[type[errors.RequestError]]:
    """``RequestError`` and every subclass ``core.errors`` defines, by status then name."""
    found: list[type[errors.RequestError]] = []
    pending: list[type[errors.RequestError]] = [errors.RequestError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == errors.__name__:
            found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: (c.status_code, c.__name__))


def error_rows() -> list[ErrorRow]:
    rows = [
        ErrorRow(f"`{cls.__name__}{_arguments(cls)}`", cls.status_code, str(cls.kind), _note(cls))
        for cls in request_error_classes()
    ]
    return [*rows, *ENVELOPE_RULES]


def render_table() -> list[str]:
    lines = ["| handler raises | status | `error.kind` | note |", "|---|---|---|---|"]
    for row in error_rows():
        lines.append(f"| {row.raised} | {row.status} | `{row.kind}` | {row.note or '—'} |")
    return lines


def _arguments(cls: type[errors.RequestError]) -> str:
    """``(message)``, or the class's own constructor parameters (names and defaults, no types)."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return "(message)"
    parameters = list(inspect.signature(init).parameters.values())[1:]
    return str(inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in parameters]))


def _note(cls: type[errors.RequestError]) -> str:
    if cls is errors.RequestError:
        return "the base class; subclass it for another status"
    own = cls.__dict__.get("__doc__")
    if not own:
        return ""
    return " ".join(inspect.cleandoc(own).split("\n\n", 1)[0].split())
