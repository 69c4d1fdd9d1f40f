"""Keel's error vocabulary: the typed errors, failures as values, and the retry verdict.

Three things live here, and they answer three different questions.

* **What went wrong, typed.** Every error Keel raises for a caller to handle inherits
  :class:`KeelError`, so one ``except KeelError`` is a complete boundary. :class:`StoreUnavailable`
  (the backing store could not be reached) and :class:`StoreValueError` (a counter and a non-counter
  share a key) are the two a store caller must tell apart: the first is usually worth a retry, the
  second never is. :class:`ToolArgumentError` is deliberately *not* a ``KeelError``: a model sending a
  bad argument is a value problem, so it is a :class:`ValueError` that argument-handling code already
  catches.
* **Is trying again worth anything.** :func:`classify` maps an exception to an :class:`ErrorClass`.
  ``unknown`` is never retried: a guessed retry costs money and buys nothing.
* **An error as data.** A :class:`Failure` is a value a parent can route around (a fan-out slot that
  failed); :func:`compose_failures` folds several into one.

Choices made where the specification leaves room:

* An exception may declare its own verdict through an ``error_class`` attribute (an
  :class:`ErrorClass` or its string value). That is how an adapter in ``tools/`` makes its client's
  errors classifiable without ``core`` importing the client. A declaration beats every other rule.
* HTTP statuses are read duck-typed from ``status_code``, ``status`` or ``response.status_code``:
  408, 429 and every 5xx are transient; every other 4xx is permanent; any other status is ignored.
* An exception group is transient only when every member is, permanent when any member is, and
  unknown otherwise: retrying a batch helps only when every part of it was a flake.
* :class:`StoreValueError` and :class:`ToolArgumentError` declare ``permanent``: repeating the same
  call with the same arguments cannot succeed.
* :func:`compose_failures` returns a single failure unchanged rather than wrapping it, so a fan-out
  with one failed slot reports that slot directly.

This module imports only the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ErrorClass",
    "Failure",
    "KeelError",
    "StoreUnavailable",
    "StoreValueError",
    "ToolArgumentError",
    "classify",
    "compose_failures",
    "require_integer_amount",
]


class KeelError(Exception):
    """The single base of Keel's own typed errors."""


class ErrorClass(enum.StrEnum):
    """Whether retrying a failed call can help."""

    TRANSIENT = "transient"
    """A timeout, a dropped connection, a 429 or a 5xx: back off and try again."""
    PERMANENT = "permanent"
    """A 401, a malformed request: the same call will fail the same way."""
    UNKNOWN = "unknown"
    """Unrecognised: not retried, because an unjustified retry is a cost with no upside."""


class StoreUnavailable(KeelError):
    """A store operation could not reach its backing store (infrastructure, not logic)."""

    error_class: ErrorClass = ErrorClass.TRANSIENT


class StoreValueError(KeelError):
    """An increment met a non-integer: the amount, or the value already stored under the key.

    Backends build it through :meth:`bad_amount` and :meth:`not_a_counter` (or
    :func:`require_integer_amount`) so the same mistake reads the same on every backend. ``key`` names
    the key involved and ``amount`` holds the rejected amount, when the amount was the problem.
    """

    error_class: ErrorClass = ErrorClass.PERMANENT

    def __init__(self, message: str, *, key: str, amount: object = None) -> None:
        super().__init__(message)
        self.key = key
        self.amount = amount

    @classmethod
    def bad_amount(cls, key: str, amount: object) -> StoreValueError:
        """The increment amount is not an integer (``bool`` and whole floats such as ``2.0`` included)."""
        return cls(
            f"cannot increment {key!r} by {amount!r}: the amount must be an int",
            key=key,
            amount=amount,
        )

    @classmethod
    def not_a_counter(cls, key: str) -> StoreValueError:
        """The key already holds something other than an integer (a document, a string, null)."""
        return cls(f"cannot increment {key!r}: it holds a value that is not an integer", key=key)


def require_integer_amount(key: str, amount: object) -> int:
    """Return ``amount`` if it is an ``int`` (not a ``bool``), else raise :class:`StoreValueError`.

    Every backend calls this before touching its store, so a bad amount is refused identically
    everywhere and never reaches a driver.
    """
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise StoreValueError.bad_amount(key, amount)
    return amount


class ToolArgumentError(ValueError):
    """A tool was called with an argument it cannot accept.

    Not a :class:`KeelError`, on purpose: it is a value problem, caught where ``ValueError`` already is.
    ``tool`` and ``argument`` name what was wrong, when known.
    """

    error_class: ErrorClass = ErrorClass.PERMANENT

    def __init__(self, message: str, *, tool: str | None = None, argument: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool
        self.argument = argument


_TRANSIENT_STATUSES: Final = frozenset({408, 429})


def _declared_class(exc: BaseException) -> ErrorClass | None:
    declared = getattr(exc, "error_class", None)
    if isinstance(declared, ErrorClass):
        return declared
    if isinstance(declared, str):
        try:
            return ErrorClass(declared)
        except ValueError:
            return None
    return None


def _http_status(exc: BaseException) -> int | None:
    candidates = (
        getattr(exc, "status_code", None),
        getattr(exc, "status", None),
        getattr(getattr(exc, "response", None), "status_code", None),
    )
    for status in candidates:
        if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
            return status
    return None


def _class_of_status(status: int | None) -> ErrorClass | None:
    if status is None:
        return None
    if status in _TRANSIENT_STATUSES or 500 <= status <= 599:
        return ErrorClass.TRANSIENT
    if 400 <= status <= 499:
        return ErrorClass.PERMANENT
    return None  # an informational, success or redirect status says nothing about retrying


def _class_of_group(group: BaseExceptionGroup[BaseException]) -> ErrorClass:
    verdicts = {classify(member) for member in group.exceptions}
    if ErrorClass.PERMANENT in verdicts:
        return ErrorClass.PERMANENT
    if verdicts == {ErrorClass.TRANSIENT}:
        return ErrorClass.TRANSIENT
    return ErrorClass.UNKNOWN


def classify(exc: BaseException) -> ErrorClass:
    """Decide whether retrying the call that raised ``exc`` is worth anything.

    In order: a declared ``error_class``; an HTTP status; an exception group (by its members);
    timeouts and connection errors are transient; everything else, ``ValueError`` and ``TypeError``
    included, is unknown.
    """
    declared = _declared_class(exc)
    if declared is not None:
        return declared
    by_status = _class_of_status(_http_status(exc))
    if by_status is not None:
        return by_status
    if isinstance(exc, BaseExceptionGroup):
        return _class_of_group(exc)
    if isinstance(exc, TimeoutError | ConnectionError):
        return ErrorClass.TRANSIENT
    return ErrorClass.UNKNOWN


@dataclass(frozen=True)
class Failure:
    """A failed piece of work described as a value rather than raised.

    ``category`` is the retry verdict, ``source`` names the slot or step that failed, ``cause`` is the
    exception behind it (``None`` for a step that completed but missed its goal), ``partial_output`` is
    whatever the step produced before failing, and ``children`` holds the parts of an aggregate.

    ``partial_output`` is carried as given, not frozen: like a provider's cache hint it is an object
    the framework passes along without owning (a half-built model, a list of partial rows).
    Equality compares every field; the hash leaves ``partial_output`` out so a failure stays hashable
    whatever it carries.
    """

    category: ErrorClass
    source: str
    cause: BaseException | None = None
    partial_output: object = None
    children: tuple[Failure, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "category", ErrorClass(self.category))
        object.__setattr__(self, "children", tuple(self.children))

    def __hash__(self) -> int:
        return hash((self.category, self.source, self.cause, self.children))

    @classmethod
    def from_exception(cls, exc: BaseException, *, source: str, partial_output: object = None) -> Failure:
        """Describe ``exc`` as a failure of ``source``, categorised by :func:`classify`."""
        return cls(category=classify(exc), source=source, cause=exc, partial_output=partial_output)


def _combined_category(failures: tuple[Failure, ...]) -> ErrorClass:
    categories = {failure.category for failure in failures}
    if ErrorClass.PERMANENT in categories:
        return ErrorClass.PERMANENT
    if categories == {ErrorClass.TRANSIENT}:
        return ErrorClass.TRANSIENT
    return ErrorClass.UNKNOWN


def _gather(items: tuple[object, ...]) -> tuple[Failure, ...]:
    found: list[Failure] = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Failure):
            found.append(item)
        elif isinstance(item, Iterable) and not isinstance(item, str | bytes):
            found.extend(part for part in item if isinstance(part, Failure))
        else:
            raise TypeError(
                f"compose_failures takes failures or iterables of them, not {type(item).__name__}"
            )
    return tuple(found)


def compose_failures(
    *failures: Failure | Iterable[object] | None, source: str = "composite"
) -> Failure | None:
    """Fold failures into one: ``None`` when there are none, the failure itself when there is one.

    Each argument is a :class:`Failure`, ``None`` (skipped) or an iterable whose :class:`Failure` items
    are taken and whose other items are skipped — so the slots of a best-effort fan-out, results and
    failures mixed, can be passed as they are. Several failures become one whose ``children`` keep
    their order, whose ``cause`` groups their causes (or is ``None`` when none has one), and whose
    category is transient only if every child's is, permanent if any child's is, else unknown.
    """
    found = _gather(failures)
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    causes = [failure.cause for failure in found if failure.cause is not None]
    group = BaseExceptionGroup(f"{len(found)} failures in {source}", causes) if causes else None
    return Failure(category=_combined_category(found), source=source, cause=group, children=found)
